"""The sandbox a submission's kernel runs in while it is graded (see grading/execute.py).

bubblewrap (``bwrap``, from the OS packages) gives the kernel its own pid namespace, so nothing
that the kernel or its ranks start outlives it or can signal the grader; its own network
namespace (loopback only: the ranks still talk to each other); and a file system of the
system's directories, Python and the course's packages, all read-only. It holds no solutions,
source notebooks, tests, git history, gradebook, grading code or student folder, and the kernel
runs in an empty folder, so files handed in beside a notebook cannot shadow the course's
modules. /tmp, /dev/shm and $HOME are private and empty (Python itself may still live in the
machine's /tmp: it is shown on top), and the environment is reduced to what Python, torch and
the launcher read. GPUs are hidden unless the instructor shows them
(``--SandboxedExecute.gpus=True``): the tests run on the CPU, so a grade means the same on any
grader, and kernels graded in parallel do not contend for one GPU.

Every kernel, sandboxed or not, has the course being graded first on its Python path
(`course_first`), whatever the environment's install of the course points to.

A watchdog in the grading process (grading/watchdog.py) counts the sandbox's tasks (processes
and threads) and its memory several times a second, and stops the whole sandbox when either
passes its cap. Inside, the same task cap is also the kernel's RLIMIT_NPROC, which the kernel
enforces at fork (except for root, which it exempts); a pids cgroup does it for root where one
can be made.
"""

from __future__ import annotations

import functools
import glob
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager
from traitlets import Bool, Integer, Unicode

from .distribution import PACKAGES
from .release import ROOT
from .watchdog import UNCOUNTED_CPU, GiB, Watchdog

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
# The variable naming the file of the key a kernel's guard proves test cells ran with (its
# only readers: the guard, which deletes it, and the grader; launcher/guard.py's KEY_FILE).
KEY_FILE = "COURSE_GUARD_KEY_FILE"
# The environment variables a kernel keeps: Python's, torch's, the launcher's and nbgrader's.
KEPT = {"PATH", "LANG", "LANGUAGE", "TZ", "TERM", "MPLBACKEND", "PYTHONHASHSEED", KEY_FILE}
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


def python_prefixes(kernel_python: str) -> list[str]:
    """The folders the grader's and the kernel's Pythons are installed in."""
    return [sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(kernel_python).resolve().parents[1])]


def python_paths(kernel_python: str) -> list[str]:
    """Where the kernel's Python and its packages live: the prefixes, and what is on sys.path
    (the folder nbgrader runs in, the course's, is not: it is sys.path's first entry)."""
    paths = python_prefixes(kernel_python)
    paths += [p for p in sys.path[1:] if p and os.path.isdir(p) and Path(p).resolve() != Path.cwd().resolve()]
    visible: list[str] = []
    for path in dict.fromkeys(os.path.abspath(p) for p in paths):
        if not any(Path(path).is_relative_to(other) for other in visible):
            visible = [v for v in visible if not Path(v).is_relative_to(path)] + [path]
    return visible


def _python_environment(path: str, kernel_python: str) -> bool:
    """Whether a folder of Python's is an environment's own (a prefix, or where packages are
    installed), rather than a source folder someone put on sys.path."""
    prefixes = {os.path.abspath(p) for p in python_prefixes(kernel_python)}
    return path in prefixes or bool({"site-packages", "dist-packages"} & set(Path(path).parts))


def sandbox_command(
    bwrap: str,
    kernel_cmd: list[str],
    runtime: str,
    hidden: list[Path],
    max_tasks: int,
    max_file: int,
    gpus: bool = False,
) -> list[str]:
    """The bwrap command line that runs ``kernel_cmd`` in the sandbox.

    ``hidden`` are folders the sandbox must not show (the course's): where one lies inside a
    folder it shows, an empty one covers it, and then only the course's packages and the Python
    environments' folders kept inside it are shown again.
    """
    paths = python_paths(kernel_cmd[0])
    inside = [p for p in paths if any(Path(p).is_relative_to(h) for h in hidden)]
    shown = [p for p in paths if p not in inside and not Path("/tmp").is_relative_to(p)]
    # The sandbox's own folders first, then what it shows on top of them: Python may live in the
    # machine's /tmp, which the sandbox's private /tmp would otherwise cover.
    mounts = ["--tmpfs", "/tmp", "--dir", "/tmp/home", "--dir", "/tmp/work"]
    mounts += ["--ro-bind", "/sys", "/sys", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/dev/shm"]
    for device in sorted(glob.glob("/dev/nvidia*") + glob.glob("/dev/dri")) if gpus else []:
        mounts += ["--dev-bind", device, device]
    mounts += _readable(SYSTEM) + _readable(shown)
    for folder in hidden:
        if any(folder.is_relative_to(p) for p in [*shown, "/usr", "/etc"]):
            mounts += ["--tmpfs", str(folder)]
    # Python's own folders kept inside the course's (its .venv, say) are shown again, not the rest.
    environments = [
        p
        for p in inside
        if _python_environment(p, kernel_cmd[0]) and not any(h.is_relative_to(p) for h in hidden)
    ]
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


def sandbox_environment(env: dict[str, str], gpus: bool = False) -> dict[str, str]:
    """The kernel's environment: none of the grader's own settings, tokens or paths."""
    kept = {k: v for k, v in env.items() if k in KEPT or k.startswith(KEPT_PREFIXES)}
    if gpus and "LD_LIBRARY_PATH" in env:
        kept["LD_LIBRARY_PATH"] = env["LD_LIBRARY_PATH"]  # where some systems keep the CUDA driver
    if not gpus:
        kept["CUDA_VISIBLE_DEVICES"] = ""  # CUDA then finds no GPU at once, without asking the driver
    return {**kept, "HOME": "/tmp/home", "TMPDIR": "/tmp", "MPLCONFIGDIR": "/tmp/home/matplotlib"}


# Installs grading's guard against tampering (launcher/guard.py) as the kernel starts.
GUARDED_PACKAGE = "autograder"  # the checks: the guard notes their functions, and what they rely on
GUARD = f"--IPKernelApp.exec_lines=import launcher.guard; launcher.guard.install({GUARDED_PACKAGE!r})"


def course_first(env: dict[str, str]) -> dict[str, str]:
    """A kernel's environment in which the course being graded (ROOT, where this grading code
    lives) comes first on Python's path: its kernel then imports the course's packages from there,
    whatever the environment's install of the course points to (another copy's editable install,
    say), and so do the launcher's fork server and ranks, which inherit it."""
    return {**env, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])}


class CourseKernelManager(AsyncKernelManager):
    """A kernel manager whose kernel imports the course being graded (see `course_first`), and
    whose stderr goes to ``stderr_path`` when that is set (the check before grading reads it)."""

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.stderr_path: str | None = None
        self.guard = True  # start the kernel guarded against tampering (launcher/guard.py)
        self.guard_key: bytes | None = None  # the key its guard proves test cells ran with
        self.imports_first = ""  # code the kernel runs before the guard is installed (a spare's imports)
        self.server_ahead = False  # fork the launcher's fork server as the kernel starts

    async def _async_pre_start_kernel(self, **kw: Any) -> tuple[list[str], dict[str, Any]]:
        kw["env"] = course_first(kw.get("env") or dict(os.environ))
        first = [f"--IPKernelApp.exec_lines={self.imports_first}"] if self.imports_first else []
        if self.guard:
            # Before any cell: the guard notes what grading relies on, and watches what code does.
            first.append(GUARD)
            kw["env"][KEY_FILE] = self._key_file()
        kw["extra_arguments"] = [*first, *kw.get("extra_arguments", [])]
        return await super()._async_pre_start_kernel(**kw)

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        cmd = super().format_kernel_cmd(extra_arguments)
        if cmd[1:3] == ["-m", "ipykernel_launcher"]:
            # launcher/kernel.py: ipykernel's kernel, interrupted as it should be in the sandbox,
            # and, for a notebook that launches ranks, with its fork server forked as it starts,
            # from one import of torch for both (a second interpreter importing torch costs a
            # second of CPU).
            ahead = ["--fork-server", *([f"--guarded={GUARDED_PACKAGE}"] if self.guard else [])]
            cmd[1:3] = [str(ROOT / "launcher" / "kernel.py"), *(ahead if self.server_ahead else [])]
        return cmd

    def _key_file(self) -> str:
        """A new key for the kernel's guard, in a file only this user can read, in a folder the
        sandbox shows the kernel (its runtime folder); the guard deletes it as it reads it."""
        self.guard_key = secrets.token_bytes(32)
        folder = getattr(self, "_runtime", "") or tempfile.gettempdir()
        descriptor, path = tempfile.mkstemp(prefix="guard-", dir=folder)
        with os.fdopen(descriptor, "wb") as file:
            file.write(self.guard_key)
        return path

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
        if self.stderr_path is None:
            return await super()._async_launch_kernel(kernel_cmd, **kw)
        with open(self.stderr_path, "ab") as stderr:
            kw["stderr"] = stderr
            await super()._async_launch_kernel(kernel_cmd, **kw)


class SandboxedKernelManager(CourseKernelManager):
    """A kernel manager whose kernel runs in a bubblewrap sandbox, under a watchdog."""

    max_tasks = Integer(512, help="Processes and threads the sandbox may run at once.")
    max_memory = Integer(4 * GiB, help="Bytes of memory the sandbox may use.")
    bwrap = Unicode("bwrap", help="The bubblewrap program.")
    gpus = Bool(False, help="Show the machine's GPUs to the kernel.")

    def __init__(self, **kwargs: Any):
        super().__init__(**kwargs)
        self.hidden: list[Path] = [ROOT.resolve(), Path.cwd().resolve()]  # the course's folders
        self.watchdog: Watchdog | None = None
        self.cgroup: Path | None = None
        self._runtime = ""  # made when the kernel starts: a manager may never start one
        self.started_ahead = False  # a spare kernel, started while the notebook before ran
        self.purpose = ""  # what the kernel is for, when not a submission (its log line says it)

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
        self._runtime = self._runtime or tempfile.mkdtemp(prefix="sandbox-")
        self.transport = "ipc"
        self.ip = os.path.join(self._runtime, "kernel")
        self.connection_file = os.path.join(self._runtime, "connection.json")
        return await super()._async_pre_start_kernel(**kw)

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
        # The task cap, enforced at fork by the kernel: RLIMIT_NPROC for an ordinary user, a pids
        # cgroup for root; the watchdog stops the sandbox when it is reached, and is the only
        # cap where neither can be had. (A fork bomb starves the watchdog of CPU time.)
        nproc = self.max_tasks if nproc_counts_per_sandbox() else 0
        command = sandbox_command(
            self.bwrap, kernel_cmd, self._runtime, self.hidden, nproc, self.max_memory, self.gpus
        )
        self.cgroup = None if nproc else pids_cgroup(self.max_tasks)
        if self.cgroup is not None:
            command = [
                "/bin/sh",
                "-c",
                'echo $$ > "$0" && exec "$@"',
                str(self.cgroup / "cgroup.procs"),
                *command,
            ]
        # (Only the course on Python's path: the grader's own entries are not the kernel's business.)
        kw["env"] = {
            **sandbox_environment(kw.get("env") or dict(os.environ), self.gpus),
            "PYTHONPATH": str(ROOT),
        }
        kw.pop("cwd", None)
        # Not watched through its parent's pid, which the sandbox hides: bwrap's --die-with-parent
        # stops it when the grader dies.
        kw["independent"] = True
        # The grader's terminal is not the submission's: what the kernel writes outside the cells'
        # output (its own start-up notes) goes nowhere.
        kw["stdout"], kw["stderr"] = subprocess.DEVNULL, subprocess.DEVNULL
        await super()._async_launch_kernel(command, **kw)
        process = self.provisioner.process
        self.watchdog = Watchdog(process, self.max_tasks, self.max_memory, self.cgroup)
        self.watchdog.start()

    def stop_sandbox(self, reason: str) -> None:
        if self.watchdog is not None:
            self.watchdog.stop(reason)

    @property
    def stop_reason(self) -> str | None:
        return self.watchdog.reason if self.watchdog is not None else None

    async def _async_kill_kernel(self, restart: bool = False) -> None:
        # (nbclient's shutdown_kernel="immediate".) Through the watchdog, which kills the
        # sandbox's pid 1 and lets bwrap reap it, rather than bwrap's process group.
        if self.watchdog is not None and not restart:
            self.watchdog.stop(count_cpu=True)
            if self.provisioner is not None and await self.provisioner.poll() is not None:
                await self.provisioner.wait()  # gone: no process group left to signal
                return
        await super()._async_kill_kernel(restart=restart)

    async def cleanup_resources(self, restart: bool = False) -> None:
        if self.watchdog is not None:
            self.watchdog.stop()
            self.watchdog.join(timeout=5)
            self.log.info(
                "Sandbox%s: at most %d processes and threads, %.2f GiB of memory; %s %.2f s",
                f" ({self.purpose})"
                if self.purpose
                else " (kernel started ahead)"
                if self.started_ahead
                else "",
                self.watchdog.peak_tasks,
                self.watchdog.peak_memory / GiB,
                UNCOUNTED_CPU,
                self.watchdog.uncounted_cpu_s,
            )
        await super().cleanup_resources(restart=restart)
        if not restart:
            self.discard()

    def discard(self) -> None:
        """Kill the sandbox, if it still runs, and remove what was made for it."""
        if self.watchdog is not None:
            self.watchdog.stop()
            self.watchdog.join(timeout=5)
        process = getattr(self.provisioner, "process", None)
        if process is not None and process.poll() is None:
            process.kill()
        if process is not None:
            process.wait()
        if self._runtime:
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
