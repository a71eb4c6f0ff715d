"""Each submitted notebook's kernel runs in a sandbox while it is graded.

Plain ``nbgrader autograde``, with the course's configuration (autograder/nbgrader_config.py),
executes every submission with `SandboxedExecute`, which starts its kernel with
`SandboxedKernelManager`:

- bubblewrap (``bwrap``, from the OS packages) gives the kernel its own pid namespace, so
  nothing that the kernel or its ranks start outlives it or can signal the grader; its own
  network namespace (loopback only: the ranks still talk to each other); and a file system of
  the system's directories, Python and the course's packages, all read-only. It holds no
  solutions, source notebooks, tests, git history, gradebook or student folder, and the kernel
  runs in an empty folder, so files handed in beside a notebook cannot shadow the course's
  modules. /tmp, /dev/shm and $HOME are private and empty, and the environment is reduced to
  what Python, torch and the launcher read.
- A watchdog in the grading process counts the sandbox's tasks (processes and threads) and its
  memory (the proportional set size of its processes, plus what its /tmp and /dev/shm hold)
  several times a second, and stops the whole sandbox when either passes its cap. Inside, the
  same task cap is also the kernel's RLIMIT_NPROC, which the kernel enforces at fork (except
  for root, which it exempts). cgroups would be the kernel's own way to cap both, but an
  ordinary user can create them only where systemd delegates them; the watchdog works anywhere.
- Each notebook has a time budget: a cell may run for nbgrader's per-cell timeout or what is
  left of the budget, whichever is less. A cell that ignores the interrupt and hangs costs what
  is left of the budget, not a timeout per remaining cell.
- A cell during which the kernel died, or during which the watchdog stopped the sandbox, fails
  with a message that says why, and so does every cell after it; the cells before keep their
  points. A cell's output is kept up to a cap; a flood is cut short, with a note.

Where bubblewrap is missing or cannot make a sandbox, grading stops before the first
submission and says how to install it, unless the instructor turns the sandbox off
(``--SandboxedExecute.sandbox=False``), which every notebook graded then logs as a warning.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

import nbformat
from jupyter_client.manager import AsyncKernelManager
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbgrader.preprocessors import Execute
from traitlets import Bool, Integer, Unicode

from .distribution import PACKAGES
from .release import ROOT

GiB = 2**30
INSTALL = (
    "Install bubblewrap from your system's packages: `sudo apt install bubblewrap` (Debian, "
    "Ubuntu), `sudo dnf install bubblewrap` (Fedora), `sudo pacman -S bubblewrap` (Arch). "
    "To grade without a sandbox anyway, which is safe only for submissions you trust, add "
    "--SandboxedExecute.sandbox=False to the nbgrader command, or set "
    "c.SandboxedExecute.sandbox = False in nbgrader_config.py."
)
# Every namespace bwrap can make; a session of its own, so that the kernel cannot signal the
# grader's process group or push characters into its terminal; killed if the grader dies. The
# kernel is the namespace's pid 1 (not a reaper of bwrap's between it and the grader), so that
# the CPU time it and its ranks use is counted to the grader, which waits for it.
NAMESPACES = ["--unshare-all", "--new-session", "--die-with-parent", "--as-pid-1"]
# The system's directories the kernel may read (those that exist; symbolic links are copied).
SYSTEM = ["/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]
# The environment variables a kernel keeps: Python's, torch's, the launcher's and nbgrader's.
KEPT = {"PATH", "LANG", "LANGUAGE", "TZ", "TERM", "MPLBACKEND", "PYTHONHASHSEED"}
KEPT_PREFIXES = ("LC_", "NBGRADER_", "OMP_", "MKL_", "CUDA_", "NCCL_", "TORCH_", "GLOO_")
KEPT_PREFIXES += ("NVIDIA_", "PYDEVD_")
# Inside the sandbox, before the kernel starts: the task cap (0: none), no file larger than the
# memory cap, no core dumps, and a lower priority than the grader's, so that the watchdog still
# runs while a submission keeps every core busy. (An inline program: importing this module
# there would cost a second.)
LIMITS = (
    "import os, resource, sys\n"
    "tasks, size = int(sys.argv[1]), int(sys.argv[2])\n"
    "if tasks:\n"
    "    resource.setrlimit(resource.RLIMIT_NPROC, (tasks, tasks))\n"
    "resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))\n"
    "resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n"
    "os.nice(10)\n"
    "os.execv(sys.argv[3], sys.argv[3:])\n"
)


def nproc_counts_per_sandbox() -> bool:
    """Whether RLIMIT_NPROC caps the sandbox's own tasks: it counts a user's tasks in each user
    namespace only since Linux 5.14 (before, all of the user's tasks everywhere), and never
    binds root."""
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    return (major, minor) >= (5, 14) and os.getuid() != 0


def pids_cgroup(max_tasks: int) -> Path | None:
    """A new pids cgroup that lets at most ``max_tasks`` tasks run in it, where this process
    may make one (as root, usually), or None."""
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if "pids" in controllers.split(","):  # cgroup v1
                parent = Path("/sys/fs/cgroup/pids") / path.lstrip("/")
            elif (
                controllers == "" and "pids" in Path("/sys/fs/cgroup/cgroup.controllers").read_text().split()
            ):
                parent = Path("/sys/fs/cgroup") / path.lstrip("/")  # cgroup v2
            else:
                continue
            cgroup = Path(tempfile.mkdtemp(prefix="sandbox-", dir=parent))
            try:
                (cgroup / "pids.max").write_text(str(max_tasks))
            except OSError:  # cgroup v2, where the parent does not hand the pids controller down
                cgroup.rmdir()
                return None
            return cgroup
    except (OSError, ValueError):
        pass
    return None


class SandboxUnavailable(KeyboardInterrupt):
    """Grading cannot sandbox submissions here.

    A KeyboardInterrupt because that is the one error on which nbgrader stops grading a class,
    after removing the half-made folder of the student it was on: after any other error it
    goes on to the next student, who would fail the same way.
    """


@functools.cache
def bwrap_problem(bwrap: str) -> str | None:
    """Why bubblewrap cannot make the sandbox on this machine, or None when it can."""
    path = shutil.which(bwrap)
    if path is None:
        return f"bubblewrap ({bwrap!r}) is not installed, or not on PATH."
    probe = [path, *NAMESPACES, "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"]
    try:
        result = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap ({path}) did not run: {error}."
    if result.returncode != 0:
        return (
            f"bubblewrap ({path}) cannot make a sandbox here: {result.stderr.strip()}. It needs "
            "user namespaces, which some systems switch off (sysctl kernel.unprivileged_userns_clone, "
            "or an AppArmor profile for bwrap on Ubuntu 24.04)."
        )
    return None


def _readable(paths: list[str]) -> list[str]:
    """Mount arguments that show each existing path read-only at the same place."""
    arguments = []
    for path in paths:
        if os.path.islink(path):
            arguments += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            arguments += ["--ro-bind", path, path]
    return arguments


def python_paths(kernel_python: str) -> list[str]:
    """Where the kernel's Python and its packages live: the prefixes, and what is on sys.path
    (the folder nbgrader runs in, the course's, is not: it is sys.path's first entry)."""
    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(kernel_python).resolve().parents[1])]
    paths += [p for p in sys.path[1:] if p and os.path.isdir(p) and Path(p).resolve() != Path.cwd().resolve()]
    visible: list[str] = []
    for path in dict.fromkeys(os.path.abspath(p) for p in paths):
        if not any(Path(path).is_relative_to(other) for other in visible):
            visible = [v for v in visible if not Path(v).is_relative_to(path)] + [path]
    return visible


def sandbox_command(
    bwrap: str, kernel_cmd: list[str], runtime: str, hidden: list[Path], max_tasks: int, max_file: int
) -> list[str]:
    """The bwrap command line that runs ``kernel_cmd`` in the sandbox.

    ``hidden`` are folders the sandbox must not show (the course's): where one lies inside a
    folder it shows, an empty one covers it, and then only the course's packages and a Python
    environment kept inside it are shown again.
    """
    shown = [p for p in python_paths(kernel_cmd[0]) if not any(Path(p).is_relative_to(h) for h in hidden)]
    mounts = _readable(SYSTEM) + _readable(shown)
    mounts += ["--ro-bind", "/sys", "/sys", "--proc", "/proc", "--dev", "/dev"]
    for device in sorted(glob.glob("/dev/nvidia*") + glob.glob("/dev/dri")):
        mounts += ["--dev-bind", device, device]  # a GPU, where there is one
    mounts += ["--tmpfs", "/dev/shm", "--tmpfs", "/tmp", "--dir", "/tmp/home", "--dir", "/tmp/work"]
    for folder in hidden:
        if any(folder.is_relative_to(p) for p in [*shown, "/usr", "/etc"]):
            mounts += ["--tmpfs", str(folder)]
    environments = [sys.prefix] if any(Path(sys.prefix).is_relative_to(h) for h in hidden) else []
    mounts += _readable(environments + [str(ROOT / package) for package in PACKAGES])
    # The kernel's connection file and the sockets it talks to the grader through.
    mounts += ["--bind", runtime, runtime]
    limits = [kernel_cmd[0], "-c", LIMITS, str(max_tasks), str(max_file)]
    return [
        shutil.which("bwrap") or "bwrap",
        *NAMESPACES,
        *mounts,
        "--chdir",
        "/tmp/work",
        "--",
        *limits,
        *kernel_cmd,
    ]


def sandbox_environment(env: dict[str, str]) -> dict[str, str]:
    """The kernel's environment: none of the grader's own settings, tokens or paths."""
    kept = {k: v for k, v in env.items() if k in KEPT or k.startswith(KEPT_PREFIXES)}
    return {**kept, "HOME": "/tmp/home", "TMPDIR": "/tmp", "MPLCONFIGDIR": "/tmp/home/matplotlib"}


def _children(pid: int) -> list[int]:
    children = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                children.append(int(entry.name))
    return children


def _tasks_and_memory(pid: int) -> tuple[int, int]:
    """A process's thread count and proportional set size in bytes (0, 0 if it is gone)."""
    try:
        threads = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[17])
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except (OSError, IndexError, ValueError):
        return 0, 0
    pss = next((line.split()[1] for line in rollup.splitlines() if line.startswith("Pss:")), "0")
    return threads, int(pss) * 1024


def _used(folder: str) -> int:
    try:
        stats = os.statvfs(folder)
    except OSError:
        return 0
    return (stats.f_blocks - stats.f_bfree) * stats.f_frsize


class Watchdog(threading.Thread):
    """Stops a sandbox whose tasks or memory pass their caps, and keeps their peaks."""

    def __init__(
        self,
        bwrap: subprocess.Popen,
        max_tasks: int,
        max_memory: int,
        cgroup: Path | None,
        interval: float = 0.2,
    ):
        super().__init__(name=f"sandbox-watchdog-{bwrap.pid}", daemon=True)
        self.bwrap, self.max_tasks, self.max_memory = bwrap, max_tasks, max_memory
        self.cgroup = cgroup
        self.interval = interval
        self.init_pid: int | None = None  # the sandbox's pid 1 (the kernel), as the grader sees it
        self.namespace: str | None = None  # its pid namespace
        self.reason: str | None = None  # why it stopped the sandbox
        self.peak_tasks = self.peak_memory = 0
        self._done = threading.Event()

    def run(self) -> None:
        namespace = self.namespace = self._namespace()
        while namespace is not None and not self._done.wait(self.interval):
            if self._refused_forks():  # checked first: a scan of /proc is slow during a fork bomb
                self.stop(f"it tried to run more than {self.max_tasks} processes and threads at once")
                return
            members = [
                int(e.name) for e in os.scandir("/proc") if e.name.isdigit() and _in(e.name, namespace)
            ]
            if not members:
                return
            tasks = memory = 0
            for i, pid in enumerate(members):
                threads, pss = _tasks_and_memory(pid)
                tasks, memory = tasks + threads, memory + pss
                if tasks >= self.max_tasks or (i % 16 == 15 and self._refused_forks()):
                    break
            root = f"/proc/{self.init_pid}/root"
            memory += _used(f"{root}/tmp") + _used(f"{root}/dev/shm")
            self.peak_tasks, self.peak_memory = max(self.peak_tasks, tasks), max(self.peak_memory, memory)
            if tasks >= self.max_tasks or self._refused_forks():
                self.stop(f"it tried to run more than {self.max_tasks} processes and threads at once")
            elif memory > self.max_memory:
                self.stop(f"it used more than {self.max_memory / GiB:.1f} GiB of memory")

    def _refused_forks(self) -> bool:
        # The pids cgroup counts the forks it refused: one read, however many processes there are.
        try:
            events = (self.cgroup / "pids.events").read_text() if self.cgroup else "max 0"
        except OSError:
            return False
        return int(events.split()[1]) > 0

    def _namespace(self) -> str | None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not self._done.is_set():
            for child in _children(self.bwrap.pid):
                try:
                    namespace = os.readlink(f"/proc/{child}/ns/pid")
                except OSError:
                    continue
                if namespace != os.readlink("/proc/self/ns/pid"):
                    self.init_pid = child
                    return namespace
            time.sleep(0.02)
        return None

    def stop(self, reason: str | None = None) -> None:
        """Kill everything in the sandbox (its pid 1 takes the rest with it) and stop watching."""
        if reason and self.reason is None:
            self.reason = reason
        self._done.set()
        # Only while they are still the sandbox's: a pid is reused once its process is gone.
        if self.init_pid is not None and self.namespace and _in(str(self.init_pid), self.namespace):
            with contextlib.suppress(OSError):
                os.kill(self.init_pid, signal.SIGKILL)
        if self.bwrap.poll() is None:
            self.bwrap.kill()


def _in(pid: str, namespace: str) -> bool:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid") == namespace
    except OSError:
        return False


class SandboxedKernelManager(AsyncKernelManager):
    """A kernel manager whose kernel runs in a bubblewrap sandbox, under a watchdog."""

    max_tasks = Integer(512, help="Processes and threads the sandbox may run at once.")
    max_memory = Integer(4 * GiB, help="Bytes of memory the sandbox may use.")
    bwrap = Unicode("bwrap", help="The bubblewrap program.")

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.hidden: list[Path] = [ROOT.resolve(), Path.cwd().resolve()]  # the course's folders
        self.watchdog: Watchdog | None = None
        self.cgroup: Path | None = None
        self.output_tail: deque[bytes] = deque(maxlen=64)  # the end of the kernel's stdout and stderr
        self._runtime = tempfile.mkdtemp(prefix="sandbox-")

    @property
    def kernel_spec(self) -> Any:
        spec = AsyncKernelManager.kernel_spec.fget(self)
        # An interrupt is a message the kernel acts on inside the sandbox: a signal would reach
        # bwrap, outside the kernel's session.
        if spec is not None:
            spec.interrupt_mode = "message"
        return spec

    async def _async_pre_start_kernel(self, **kw: Any) -> tuple[list[str], dict[str, Any]]:
        # Unix sockets in a folder the sandbox shares: its network namespace has no route to ours.
        self.transport = "ipc"
        self.ip = os.path.join(self._runtime, "kernel")
        self.connection_file = os.path.join(self._runtime, "connection.json")
        return await super()._async_pre_start_kernel(**kw)

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
        # The task cap, enforced at fork by the kernel: RLIMIT_NPROC for an ordinary user, a pids
        # cgroup for root; the watchdog stops the sandbox when it is reached, and is the only
        # cap where neither can be had. (A fork bomb starves the watchdog of CPU time.)
        nproc = self.max_tasks if nproc_counts_per_sandbox() else 0
        command = sandbox_command(self.bwrap, kernel_cmd, self._runtime, self.hidden, nproc, self.max_memory)
        self.cgroup = None if nproc else pids_cgroup(self.max_tasks)
        if self.cgroup is not None:
            command = [
                "/bin/sh",
                "-c",
                'echo $$ > "$0" && exec "$@"',
                str(self.cgroup / "cgroup.procs"),
                *command,
            ]
        kw["env"] = sandbox_environment(kw.get("env") or dict(os.environ))
        kw.pop("cwd", None)
        # Not watched through its parent's pid, which the sandbox hides: bwrap's --die-with-parent
        # stops it when the grader dies.
        kw["independent"] = True
        kw["stdout"], kw["stderr"] = subprocess.PIPE, subprocess.STDOUT
        await super()._async_launch_kernel(command, **kw)
        process = self.provisioner.process
        threading.Thread(target=self._drain, args=(process.stdout,), daemon=True).start()
        self.watchdog = Watchdog(process, self.max_tasks, self.max_memory, self.cgroup)
        self.watchdog.start()

    def _drain(self, stream: Any) -> None:
        # The kernel's own stdout and stderr (the grader's terminal is not theirs): keep the end.
        for chunk in iter(lambda: stream.read1(4096), b""):
            self.output_tail.append(chunk)

    def stop_sandbox(self, reason: str) -> None:
        if self.watchdog is not None:
            self.watchdog.stop(reason)

    @property
    def stop_reason(self) -> str | None:
        return self.watchdog.reason if self.watchdog is not None else None

    async def cleanup_resources(self, restart: bool = False) -> None:
        if self.watchdog is not None:
            self.watchdog.stop()
            self.watchdog.join(timeout=5)
            self.log.info(
                "Sandbox: at most %d processes and threads, %.2f GiB of memory",
                self.watchdog.peak_tasks,
                self.watchdog.peak_memory / GiB,
            )
        await super().cleanup_resources(restart=restart)
        if not restart:
            shutil.rmtree(self._runtime, ignore_errors=True)
            _remove_cgroup(self.cgroup)


def _remove_cgroup(cgroup: Path | None) -> None:
    # A cgroup can be removed once its last process has gone, which takes the kernel a moment.
    for _ in range(50):
        if cgroup is None or not cgroup.exists():
            return
        try:
            cgroup.rmdir()
        except OSError:
            time.sleep(0.1)


class SandboxedExecute(Execute):
    """nbgrader's Execute, with the kernel in a sandbox and a time budget for the notebook."""

    sandbox = Bool(True, help="Run each submission's kernel in a bubblewrap sandbox.").tag(config=True)
    bwrap = Unicode("bwrap", help="The bubblewrap program.").tag(config=True)
    notebook_timeout = Integer(300, help="Seconds a whole notebook may run.").tag(config=True)
    max_memory = Integer(4 * GiB, help="Bytes of memory a notebook's sandbox may use.").tag(config=True)
    max_tasks = Integer(512, help="Processes and threads a notebook's sandbox may run.").tag(config=True)
    max_output = Integer(1_000_000, help="Characters of output kept from one cell.").tag(config=True)

    def preprocess(self, nb: Any, resources: Any = None, km: Any = None) -> tuple[Any, Any]:
        if self.sandbox:
            problem = bwrap_problem(self.bwrap)
            if problem is not None:
                message = f"Grading stopped: submissions run in a sandbox, and {problem} {INSTALL}"
                self.log.error(message)
                raise SandboxUnavailable(message)
            self.kernel_manager_class = SandboxedKernelManager
        else:
            self.log.warning(
                "Grading WITHOUT a sandbox (SandboxedExecute.sandbox is False): this submission's "
                "code can read the solutions and the gradebook, and change other students' grades."
            )
        self._deadline = time.monotonic() + self.notebook_timeout
        self._stopped: str | None = None
        self._output_sizes: dict[int, int] = {}
        return super().preprocess(nb, resources, km)

    def create_kernel_manager(self) -> Any:
        km = super().create_kernel_manager()
        if isinstance(km, SandboxedKernelManager):
            km.max_tasks, km.max_memory, km.bwrap = self.max_tasks, self.max_memory, self.bwrap
            course = self.config.get("CourseDirectory", {}).get("root")
            km.hidden += [Path(course).resolve()] if course else []
        return km

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
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except (DeadKernelError, CellTimeoutError) as error:
            # (The error's own message quotes the cell, which may hold hidden tests.)
            self._stopped = self._why_stopped(error)
            self._stop_kernel(self._stopped)
            message = f"The kernel stopped during this cell: {self._stopped}."
            cell.outputs.append(_error("KernelStopped", message))
            return cell, self.resources
        if self._check_budget() and any(o.get("ename") == "CellTimeoutError" for o in cell.outputs):
            message = f"This cell was stopped: {self._stopped}."
            cell.outputs.append(_error("NotebookTimeout", message))
        return cell, resources

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


def _error(name: str, message: str) -> Any:
    return nbformat.v4.new_output("error", ename=name, evalue=message, traceback=[f"{name}: {message}"])
