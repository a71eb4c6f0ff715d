"""nbgrader's Execute preprocessor for the course: each submission's kernel in a sandbox.

Plain ``nbgrader autograde``, with the course's configuration (grading/nbgrader_config.py),
executes every submission with `SandboxedExecute`, which starts its kernel with
`SandboxedKernelManager` (grading/sandbox.py), or outside a sandbox, where the instructor turns
it off, with `CourseKernelManager`:

- Each notebook has a time budget: a cell may run for nbgrader's per-cell timeout or what is
  left of the budget, whichever is less. A cell that ignores the interrupt and hangs costs what
  is left of the budget, not a timeout per remaining cell.
- A cell during which the kernel died, or during which the watchdog stopped the sandbox, fails
  with a message that says why, and so does every cell after it; the cells before keep their
  points. A cell's output is kept up to a cap; a flood is cut short, with a note.
- While a notebook runs, the next one's kernel starts (grading/spare_kernel.py).
- A cell that only shows something, as the instructors marked it in the source notebook, is not
  run, and says so (grading/demos.py).
- A notebook whose outcome is the grader's fault (grading/ungraded.py) is not scored: it raises
  `NotGraded`, and nbgrader names the student as one it could not grade.

Where bubblewrap is missing or cannot make a sandbox, grading stops before the first
submission and says how to install it, unless the instructor turns the sandbox off
(``--SandboxedExecute.sandbox=False``), which every notebook graded then logs as a warning.
"""

from __future__ import annotations

import hmac
import secrets
import time
from pathlib import Path
from typing import Any

import nbformat
from jupyter_client.asynchronous import AsyncKernelClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import run_sync
from nbgrader import utils
from nbgrader.preprocessors import Execute
from traitlets import Bool, Enum, Integer, Unicode

from . import demos, spare_kernel
from .hidden_tests import BEGIN, split
from .kernel_client import PromptKernelClient
from .sandbox import (
    INSTALL,
    CourseKernelManager,
    SandboxedKernelManager,
    SandboxUnavailable,
    bwrap_problem,
)
from .ungraded import NotGraded, not_graded_because
from .watchdog import GiB


class SandboxedExecute(Execute):
    """nbgrader's Execute, with the kernel in a sandbox and a time budget for the notebook."""

    sandbox = Bool(True, help="Run each submission's kernel in a bubblewrap sandbox.").tag(config=True)
    bwrap = Unicode("bwrap", help="The bubblewrap program.").tag(config=True)
    notebook_timeout = Integer(300, help="Seconds a whole notebook may run.").tag(config=True)
    max_memory = Integer(4 * GiB, help="Bytes of memory a notebook's sandbox may use.").tag(config=True)
    max_tasks = Integer(512, help="Processes and threads a notebook's sandbox may run.").tag(config=True)
    max_output = Integer(1_000_000, help="Characters of output kept from one cell.").tag(config=True)
    gpus = Bool(
        False,
        help="Show the machine's GPUs to the kernels. Off: the tests run on the CPU, so a grade does "
        "not depend on the grader's GPUs, and notebooks graded in parallel do not share one.",
    ).tag(config=True)
    shutdown_kernel = Enum(
        ["graceful", "immediate"],
        default_value="immediate",
        help="How a notebook's kernel ends after its last cell. nbclient's default, graceful, asks it "
        "to shut down and waits about a second; immediate kills the sandbox, and with it whatever "
        "the kernel started, at once.",
    ).tag(config=True)
    guard = Bool(
        True,
        help="Guard each kernel, and the ranks it starts, against tampering (launcher/guard.py). Off: "
        "only the submitted code is read for it, so a change spelled in a way reading cannot see "
        "goes unnoticed.",
    ).tag(config=True)
    spare_kernel = Bool(
        True,
        help="While a notebook runs, start the next one's kernel and do the assignment's imports in it.",
    ).tag(config=True)
    skip_demos = Bool(
        True,
        help="Do not run a submission's cells that only show something: a cell with the code of a cell "
        "tagged 'demo' in the assignment's source notebook, not an nbgrader cell, that binds no name a "
        "later cell reads (grading/demos.py). Its output says it was not run while grading. Off: every "
        "cell runs.",
    ).tag(config=True)
    _demos: frozenset[int] | set[int] = frozenset()  # the notebook's cells not run (see preprocess)
    _no_source_told = False  # (that demos run for want of a source notebook is logged once)

    def preprocess(self, nb: Any, resources: Any = None, km: Any = None) -> tuple[Any, Any]:
        if self.sandbox:
            problem = bwrap_problem(self.bwrap)
            if problem is not None:
                message = f"Grading stopped: submissions run in a sandbox, and {problem} {INSTALL}"
                self.log.error(message)
                raise SandboxUnavailable(message)
            self.kernel_manager_class = SandboxedKernelManager
        else:
            self.kernel_manager_class = CourseKernelManager
            self.log.warning(
                "Grading WITHOUT a sandbox (SandboxedExecute.sandbox is False): this submission's "
                "code can read the solutions and the gradebook, and change other students' grades."
            )
        if not self.guard:
            self.log.warning(
                "Grading WITHOUT the guard against tampering (SandboxedExecute.guard is False): only "
                "the submitted code is read for it."
            )
        self._deadline = time.monotonic() + self.notebook_timeout
        self._stopped: str | None = None
        self._output_sizes: dict[int, int] = {}
        self._demos = self._demos_to_skip(nb, resources) if self.skip_demos else set()
        nb, resources = super().preprocess(nb, resources, km)
        reason = not_graded_because(nb)
        if reason is not None:
            # nbgrader then keeps no score for it, and names the student as one it could not grade.
            self.log.error("NOT GRADED: %s", reason)
            raise NotGraded(reason)
        return nb, resources

    def _demos_to_skip(self, nb: Any, resources: Any) -> set[int]:
        """The indexes of this submission's cells that only show something and are not run: the
        instructors decide which, in the assignment's source notebook (grading/demos.py)."""
        names = (resources or {}).get("nbgrader", {})
        path = demos.source_notebook(self.config, names)
        if path is None:
            if names.get("assignment") and not SandboxedExecute._no_source_told:
                SandboxedExecute._no_source_told = True
                self.log.info("Every demo cell runs: %s has no source notebook", names["assignment"])
            return set()
        try:
            return demos.cells_to_skip(nb, demos.demo_sources(nbformat.read(path, as_version=4)))
        except Exception as error:  # noqa: BLE001 - then every cell runs, as without the option
            self.log.info("Every demo cell runs: reading %s or the submission failed (%r)", path, error)
            return set()

    # Where the kernel's own stderr goes, when set (the check before grading reads it); else
    # nowhere in the sandbox, and to the grader's outside it.
    kernel_stderr: str | None = None

    def create_kernel_manager(self) -> Any:
        km = super().create_kernel_manager()
        if isinstance(km, CourseKernelManager):
            km.stderr_path, km.guard = self.kernel_stderr, self.guard
        if isinstance(km, SandboxedKernelManager) and self.kernel_stderr is not None:
            km.purpose = "the check before grading"
        if isinstance(km, SandboxedKernelManager):
            self._configure(km)
            spare = spare_kernel.take(self._spare_key(km)) if self.kernel_stderr is None else None
            if spare is not None:
                spare.started_ahead = True
                self.km = km = spare
        if getattr(km, "client_factory", None) is AsyncKernelClient:
            km.client_factory = PromptKernelClient
        return km

    def _configure(self, km: SandboxedKernelManager) -> None:
        km.max_tasks, km.max_memory, km.bwrap = self.max_tasks, self.max_memory, self.bwrap
        km.gpus, km.guard = self.gpus, self.guard
        # Run before the guard is installed (see spare_kernel.import_code); not in the check before
        # grading, which runs a probe of its own rather than the notebook.
        km.imports_first = spare_kernel.import_code(self.nb) if self.kernel_stderr is None else ""
        km.server_ahead = self.kernel_stderr is None and spare_kernel.uses_launcher(self.nb)
        course = self.config.get("CourseDirectory", {}).get("root")
        km.hidden += [Path(course).resolve()] if course else []

    def _spare_key(self, km: SandboxedKernelManager) -> tuple:
        """What a spare kernel must have been started with to run this notebook."""
        settings = (
            km.kernel_name,
            km.max_tasks,
            km.max_memory,
            km.bwrap,
            km.gpus,
            km.guard,
            tuple(km.hidden),
        )
        # (nbclient adds the history file's argument as it starts a kernel.)
        arguments = tuple(a for a in self.extra_arguments if not a.startswith("--HistoryManager.hist_file"))
        return (*settings, arguments, spare_kernel.import_code(self.nb), spare_kernel.warm_up_code(self.nb))

    async def async_start_new_kernel_client(self) -> Any:
        km = self.km
        try:
            kc = await super().async_start_new_kernel_client()
        except Exception as error:
            # (nbclient has let go of the manager by now: the reason is read from the one it had.)
            reason = getattr(km, "stop_reason", None)
            if reason is None:
                raise
            raise RuntimeError(f"{error}: the sandbox stopped it because {reason}") from error
        if self.spare_kernel and isinstance(self.km, SandboxedKernelManager):
            await self._start_spare()
        return kc

    # nbconvert's preprocessor calls the synchronous twin, made from the method it overrides.
    start_new_kernel_client = run_sync(async_start_new_kernel_client)

    async def _start_spare(self) -> None:
        """Start the next notebook's kernel while this one runs (see grading/spare_kernel.py)."""
        km = self.kernel_manager_class(kernel_name=self.km.kernel_name, config=self.config)
        self._configure(km)
        key = self._spare_key(km)
        warm_up = [f"--IPKernelApp.exec_lines={key[-1]}"] if key[-1] else []
        try:
            await km.start_kernel(extra_arguments=[*self.extra_arguments, *warm_up])
        except Exception as error:  # noqa: BLE001 - the next notebook starts its own kernel instead
            self.log.warning("Could not start a spare kernel: %s", error)
            km.discard()
            return
        spare_kernel.keep(key, km)

    def _get_timeout(self, cell: Any) -> int | None:
        timeout = super()._get_timeout(cell)
        left = max(1, int(self._deadline - time.monotonic()))
        return left if timeout is None else min(timeout, left)

    def preprocess_cell(self, cell: Any, resources: Any, index: int) -> tuple[Any, Any]:
        if cell.cell_type != "code" or not cell.source.strip():
            return super().preprocess_cell(cell, resources, index)
        self._check_budget()
        if self._stopped is not None:
            cell.outputs = [_error("NotRun", f"This cell was not run: {self._stopped}.")]
            return cell, self.resources
        if index in self._demos:
            cell.outputs = [demos.not_run_note()]
            return cell, self.resources
        source, regions = cell.source, None
        if isinstance(self.kc, PromptKernelClient) and self.guard and _is_test(cell) and BEGIN in source:
            # The hidden regions travel beside the code, never as it (launcher/hidden_tests.py).
            cell.source, regions = split(source)
            self.kc.hidden_tests = regions
        proof = self._ask_for_proof() if self.guard and _is_test(cell) else None
        self._reply = None
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except (DeadKernelError, CellTimeoutError) as error:
            # (The error's own message quotes the cell, which may hold hidden tests.)
            self._stopped = self._why_stopped(error)
            self._stop_kernel(self._stopped)
            message = f"The kernel stopped during this cell: {self._stopped}."
            cell.outputs.append(_error("KernelStopped", message))
            return cell, self.resources
        finally:
            if regions is not None:
                cell.source, self.kc.hidden_tests = source, None
        if self._check_budget() and any(o.get("ename") == "CellTimeoutError" for o in cell.outputs):
            message = f"This cell was stopped: {self._stopped}."
            cell.outputs.append(_error("NotebookTimeout", message))
        elif proof is not None:
            changed = self._unproven(cell, proof)
            if changed is not None:
                cell.outputs = [_error("TamperingDetected", changed)]
        return cell, resources

    def _ask_for_proof(self) -> str | None:
        """Have the test cell's request end with the guard's proof that the cell ran (see
        launcher/guard.py's `install`), and return the proof expected: a keyed hash of a fresh
        word. None where the kernel's guard holds no key of ours (a kernel manager not the
        course's): then only the guard's look as the next cell starts finds a change."""
        key = getattr(self.km, "guard_key", None)
        if not isinstance(self.kc, PromptKernelClient) or not key:
            return None
        word = secrets.token_hex(16)
        self.kc.user_expressions = {PROOF: f"__import__('sys').audit({PROVE_EVENT!r}, {word!r})"}
        return hmac.new(key, word.encode(), "sha256").hexdigest()

    async def _check_raise_for_error(self, cell: Any, cell_index: int, exec_reply: Any) -> None:
        self._reply = exec_reply  # (what `_unproven` reads: nbclient keeps no other copy)
        return await super()._check_raise_for_error(cell, cell_index, exec_reply)

    def _unproven(self, cell: Any, expected: str) -> str | None:
        """Why the test cell's run is not proven, if it is not: what the guard found changed, or
        no proof where the cell reported success (code changed how the kernel runs cells, or
        answers the grader). A cell that failed, showing its error, needs none."""
        content = (self._reply or {}).get("content", {})
        if content.get("status") != "ok":
            shown = any(output.get("output_type") == "error" for output in cell.outputs)
            return None if shown else UNPROVEN
        found = content.get("user_expressions", {}).get(PROOF, {})
        if found.get("ename") == "TamperingDetected":
            return str(found.get("evalue", ""))
        if found.get("ename") == "GuardProof" and hmac.compare_digest(str(found.get("evalue", "")), expected):
            return None
        return UNPROVEN

    def _check_budget(self) -> bool:
        """Whether the notebook's time budget ran out (with under a second left) just now."""
        if self._stopped is None and time.monotonic() > self._deadline - 1:
            self._stopped = f"the notebook used up its time budget of {self.notebook_timeout} s"
            self._stop_kernel(self._stopped)
            return True
        return False

    def _why_stopped(self, error: Exception) -> str:
        reason = getattr(self.km, "stop_reason", None)
        if reason is not None:
            return f"the sandbox was stopped because {reason}"
        if isinstance(error, CellTimeoutError):
            return "it ran past its time limit and did not stop when interrupted"
        process = getattr(getattr(self.km, "provisioner", None), "process", None)
        status = process.poll() if process is not None else None
        return "the kernel died" + (f" (exit status {status})" if status is not None else "")

    def _stop_kernel(self, reason: str) -> None:
        if isinstance(self.km, SandboxedKernelManager):
            self.km.stop_sandbox(reason)

    def output(self, outs: list, msg: dict, display_id: str | None, cell_index: int) -> Any:
        content = msg.get("content", {})
        size = len(content.get("text", "")) + sum(len(str(v)) for v in content.get("data", {}).values())
        before = self._output_sizes.get(cell_index, 0)
        self._output_sizes[cell_index] = before + size
        if before + size <= self.max_output:
            return super().output(outs, msg, display_id, cell_index)
        if before <= self.max_output:
            note = f"\n[output cut: this cell wrote more than {self.max_output:,} characters]\n"
            outs.append(nbformat.v4.new_output("stream", name="stdout", text=note))
        return None


PROOF = "guard"  # the user expression that carries the guard's proof
PROVE_EVENT = "launcher.guard.prove"  # (launcher/guard.py's; grading imports nothing of the course)
UNPROVEN = (
    "code changed how the kernel runs cells or answers the grader: this test cell's run could not "
    "be proven, so the tests from here on are not graded automatically: your instructor will look "
    "at the notebook."
)


def _is_test(cell: Any) -> bool:
    return utils.is_grade(cell) and not utils.is_solution(cell)


def _error(name: str, message: str) -> Any:
    return nbformat.v4.new_output("error", ename=name, evalue=message, traceback=[f"{name}: {message}"])
