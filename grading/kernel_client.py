"""The grader's client of a kernel, whose channels look for a message at least once a second.

Now and then (once in a few notebooks of 03 on a 2-core machine, after a cell that makes
widgets), a message that has arrived does not wake pyzmq's asyncio poll, which then finds it
only when its timeout runs out: when nbclient waits for a cell's execute_reply, that is the
cell's whole timeout (two minutes), with the kernel idle all along. Polling in slices of a
second costs at most a second then. Grading (grading/sandbox.py) and the test suite's
kernels use it.
"""

from __future__ import annotations

import time
from queue import Empty
from typing import Any

from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.channels import AsyncZMQSocketChannel
from traitlets import Type

from .hidden_tests import METADATA_KEY

POLL_SLICE_S = 1.0  # how long a wait for a kernel's message goes without looking again


class PromptChannel(AsyncZMQSocketChannel):
    """A channel to a kernel that looks for a message at least every POLL_SLICE_S."""

    async def get_msg(self, timeout: float | None = None) -> dict[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                return await super().get_msg(POLL_SLICE_S if left is None else min(POLL_SLICE_S, left))
            except Empty:
                if left is not None and left <= POLL_SLICE_S:
                    raise


class PromptKernelClient(AsyncKernelClient):
    """A kernel client whose channels are `PromptChannel` s, and which sends a test cell's
    hidden regions, when given them, in its execute request's metadata (grading/hidden_tests.py),
    and user expressions, when given them (the guard's proof that the cell ran: grading/execute.py)."""

    shell_channel_class = Type(PromptChannel)
    iopub_channel_class = Type(PromptChannel)
    stdin_channel_class = Type(PromptChannel)
    control_channel_class = Type(PromptChannel)
    hidden_tests: list[str] | None = None  # the next execute request's, then cleared
    user_expressions: dict[str, str] | None = None  # the same

    def execute(self, code: str, *args: Any, **kwargs: Any) -> str:
        regions, self.hidden_tests = self.hidden_tests, None
        expressions, self.user_expressions = self.user_expressions, None
        if regions is None and expressions is None:
            return super().execute(code, *args, **kwargs)
        # (What jupyter_client's execute sends, with the metadata it has no argument for.)
        content = {
            "code": code,
            "silent": False,
            "store_history": kwargs.get("store_history", True),
            "user_expressions": expressions or {},
            "allow_stdin": False,
            "stop_on_error": kwargs.get("stop_on_error", True),
        }
        metadata = {} if regions is None else {METADATA_KEY: regions}
        message = self.session.msg("execute_request", content, metadata=metadata)
        self.shell_channel.send(message)
        return message["header"]["msg_id"]
