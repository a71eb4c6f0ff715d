"""A grading kernel's fork server, forked from the kernel's process before the kernel starts
(launcher/kernel.py): it runs the first launch, is given up when it would not serve as grading
fixes the server, and never outlives its kernel."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest

from grading import sandbox, spare_kernel
from grading.sandbox import bwrap_problem

REPO = Path(__file__).resolve().parent.parent


def run(script: str) -> dict:
    """Run ``script`` in a fresh interpreter; it prints one JSON object."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


AHEAD = """
    import json, os
    from launcher import forkserver, kernel, launch

    def parent(rank, world_size):
        return os.getppid()

    kernel.start_server_ahead({allowed})
    ahead = forkserver._ahead[1][1].pid
    {before}
    parents = launch(parent, 2)
    server = forkserver.get_server().process.pid
    forkserver.shutdown()
    gone = not os.path.exists(f"/proc/{{ahead}}") or open(f"/proc/{{ahead}}/stat").read().split()[2] == "Z"
    found = {{"ahead": ahead, "server": server, "parents": parents, "gone": gone, "me": os.getpid()}}
    print(json.dumps(found))
"""


def test_the_server_forked_ahead_runs_the_first_launch() -> None:
    found = run(AHEAD.format(allowed="()", before=""))
    assert found["server"] == found["ahead"] != found["me"]
    assert found["parents"] == [found["ahead"]] * 2
    assert found["gone"]  # shut down with the rest


def test_a_server_forked_ahead_for_other_packages_than_grading_fixed_is_stopped() -> None:
    # Forked to serve grading's packages, in a process whose guard fixed none: a server started
    # as usual takes its place.
    found = run(AHEAD.format(allowed="('torch', 'numpy', 'launcher')", before=""))
    assert found["server"] != found["ahead"]
    assert found["parents"] == [found["server"]] * 2
    assert found["gone"]


def test_a_guarded_kernel_is_given_the_packages_its_guard_fixes() -> None:
    from launcher import guard

    found = run(
        AHEAD.format(
            allowed=repr(guard.server_packages(sandbox.GUARDED_PACKAGE)),
            before=f"forkserver.fix(allowed=__import__('launcher.guard').guard.server_packages("
            f"'launcher', {sandbox.GUARDED_PACKAGE!r}))",
        )
    )
    assert found["server"] == found["ahead"]
    assert found["parents"] == [found["ahead"]] * 2


def test_a_server_forked_ahead_and_never_taken_stops_at_shutdown() -> None:
    found = run(
        """
        import json, os
        from launcher import forkserver, kernel
        kernel.start_server_ahead(())
        ahead = forkserver._ahead[1][1]
        forkserver.shutdown()
        print(json.dumps({"exit": ahead.wait(timeout=5), "left": forkserver._ahead is None}))
        """
    )
    assert found == {"exit": 0, "left": True}


def test_grading_kernels_start_through_launcher_kernel_which_forks_a_server_where_ranks_run() -> None:
    km = sandbox.CourseKernelManager()
    kernel = str(REPO / "launcher" / "kernel.py")
    assert km.format_kernel_cmd()[1:3] == [kernel, "-f"]  # no ranks: no torch ahead
    km.server_ahead = True
    guarded = km.format_kernel_cmd()
    assert guarded[1:4] == [kernel, "--fork-server", f"--guarded={sandbox.GUARDED_PACKAGE}"]
    km.guard = False
    assert km.format_kernel_cmd()[1:4] == [kernel, "--fork-server", "-f"]
    launches = nbformat.v4.new_code_cell("from launcher import launch")
    launches.metadata.nbgrader = {"locked": True, "grade_id": "setup", "grade": False, "solution": False}
    assert spare_kernel.uses_launcher(nbformat.v4.new_notebook(cells=[launches]))
    launches.metadata.nbgrader["locked"] = False  # a student's cell: not known ahead
    assert not spare_kernel.uses_launcher(nbformat.v4.new_notebook(cells=[launches]))


# Another process beside the kernel in its sandbox: the fork server, or a program a cell started.
BESIDE = {
    "its fork server": (True, "import launcher.forkserver as f\nassert f._ahead[1][1].poll() is None"),
    "a program it started": (
        False,
        "import subprocess\nsubprocess.Popen(['sleep', '60'], start_new_session=True)",
    ),
}


@pytest.mark.skipif(bwrap_problem("bwrap") is not None, reason="no sandbox here: install bubblewrap")
@pytest.mark.parametrize("beside", list(BESIDE))
def test_a_sandboxed_kernel_stops_a_hanging_cell_when_interrupted_whatever_runs_beside_it(
    beside: str,
) -> None:
    """In the sandbox the kernel is process 1, and ipykernel's own interrupt (``killpg(1)``, that
    is ``kill(-1)``) reached every process but the kernel, once any other ran."""
    server_ahead, start = BESIDE[beside]

    async def interrupted() -> tuple[str, float]:
        km = sandbox.SandboxedKernelManager()
        km.server_ahead = server_ahead
        await km.start_kernel()
        kc = km.client()
        kc.start_channels()
        try:
            await kc.wait_for_ready(timeout=120)
            cell = kc.execute(f"{start}\nwhile True: pass")
            await asyncio.sleep(1.0)
            await km.interrupt_kernel()
            began = time.monotonic()
            while True:
                message = await kc.get_iopub_msg(timeout=20)
                if message["parent_header"].get("msg_id") == cell and message["msg_type"] == "error":
                    return message["content"]["ename"], time.monotonic() - began
        finally:
            kc.stop_channels()
            await km.shutdown_kernel(now=True)

    ename, seconds = asyncio.run(interrupted())
    assert ename == "KeyboardInterrupt"
    assert seconds < 10
