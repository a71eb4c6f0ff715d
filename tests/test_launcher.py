"""The launcher called from a script or a test: inputs, backends, devices, torchrun, recovery."""

from __future__ import annotations

import functools
import gc
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import machine
import psutil
import pytest
import torch
import torch.distributed as dist

import launcher
from launcher import LaunchError, LaunchHang, RankException, call, get_device, launch
from launcher.forkserver import ForkServerError, get_server
from launcher.output import OutputPrinter

REPO = Path(__file__).resolve().parent.parent


def rank_and_size(rank: int, world_size: int) -> tuple[int, int]:
    return rank, world_size


@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_every_rank_returns_in_rank_order(world_size: int) -> None:
    assert launch(rank_and_size, world_size) == [(r, world_size) for r in range(world_size)]


def sum_of_ranks(rank: int, world_size: int, dtype: torch.dtype) -> torch.Tensor:
    t = torch.tensor([rank], dtype=dtype, device=get_device())  # NCCL's on a machine with GPUs
    dist.all_reduce(t)
    return t.cpu()


@pytest.mark.parametrize("world_size", [1, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_collectives_work_for_odd_sizes_and_integer_dtypes(world_size: int, dtype: torch.dtype) -> None:
    results = launch(sum_of_ranks, world_size, dtype)
    assert all(r.dtype == dtype and r.item() == sum(range(world_size)) for r in results)


# -- bad input is refused before any rank starts ----------------------------------------------


@pytest.fixture
def no_rank_may_start(monkeypatch):
    """Fails the test if launch gets as far as starting ranks."""

    def refuse(*args, **kwargs):
        raise AssertionError("launch started ranks for a call it should have refused")

    monkeypatch.setattr(call, "Supervisor", refuse)


@pytest.mark.parametrize(
    "world_size, error, words",
    [
        (0, ValueError, "world_size must be at least 1"),
        (-2, ValueError, "world_size must be at least 1 (one process per rank); got -2"),
        (2.0, TypeError, "world_size must be a whole number of ranks, such as 4; got 2.0"),
        ("4", TypeError, "got '4' (of type str)"),
        (True, TypeError, "world_size must be a whole number of ranks"),
        (None, TypeError, "got None"),
        (1000, ValueError, "launch allows at most 64"),
    ],
)
def test_bad_world_sizes_are_refused_with_the_reason(world_size, error, words, no_rank_may_start) -> None:
    with pytest.raises(error, match=_literal(words)):
        launch(rank_and_size, world_size)


def test_a_non_callable_is_refused(no_rank_may_start) -> None:
    with pytest.raises(TypeError, match=_literal("must be the function each rank runs")):
        launch(torch.ones(3), 2)


def test_a_function_with_the_wrong_parameters_is_refused(no_rank_may_start) -> None:
    def takes_one(rank):
        return rank

    with pytest.raises(TypeError, match=_literal("launch calls takes_one(rank, world_size, 5)")):
        launch(takes_one, 2, 5)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"backend": "mpi"}, "backend must be one of 'auto', 'gloo', 'nccl'; got 'mpi'"),
        ({"timeout": 0}, "timeout must be a positive number of seconds, at most a day; got 0"),
        ({"timeout": float("inf")}, "at most a day; got inf"),
        ({"timeout": "10"}, "timeout must be a positive number of seconds"),
    ],
)
def test_bad_options_are_refused(kwargs: dict, words: str, no_rank_may_start) -> None:
    with pytest.raises(ValueError, match=_literal(words)):
        launch(rank_and_size, 2, **kwargs)


OPEN_FILE = open(os.devnull, "w")  # noqa: SIM115 - a module-level open file is the point
LOCK = threading.Lock()


def writes_to_a_global_file(rank: int, world_size: int) -> None:
    OPEN_FILE.write(str(rank))


def takes_a_global_lock(rank: int, world_size: int) -> None:
    with LOCK:
        pass


def test_unpicklable_globals_are_named_before_any_rank_starts(no_rank_may_start) -> None:
    # Functions of an importable module are pickled by reference; define them in __main__'s
    # way (by value) as a notebook does, by rebinding their module.
    for fn, name, kind in [
        (writes_to_a_global_file, "OPEN_FILE", "an open file"),
        (takes_a_global_lock, "LOCK", "a lock"),
    ]:
        by_value = _as_notebook_function(fn)
        with pytest.raises(TypeError) as info:
            launch(by_value, 2)
        message = str(info.value)
        assert f"the global '{name}', used by {fn.__name__}: {kind}" in message
        assert "Create such objects inside the function" in message


def test_unpicklable_arguments_are_named(no_rank_may_start) -> None:
    with pytest.raises(TypeError, match=_literal("the keyword argument lock=: a lock (_thread.lock)")):
        launch(_as_notebook_function(rank_and_size_kw), 2, lock=threading.Lock())


def rank_and_size_kw(rank: int, world_size: int, lock=None) -> int:
    return rank


def test_launch_inside_a_rank_is_refused() -> None:
    with pytest.raises(LaunchError) as info:
        launch(_nested_launch, 2)
    assert "launch was called from inside a rank" in str(info.value)
    assert all(isinstance(f.exception, RuntimeError) for f in info.value.failures)


def _nested_launch(rank: int, world_size: int) -> None:
    launch(rank_and_size, 2)


# -- backends and devices ---------------------------------------------------------------------


def test_auto_picks_gloo_without_a_gpu() -> None:
    assert launch(_backend_and_device, 2) == [("gloo", "cpu", "cpu")] * 2


def _backend_and_device(rank: int, world_size: int) -> tuple[str, str, str]:
    return dist.get_backend(), str(get_device()), str(get_device(rank))


@pytest.mark.skipif(dist.is_nccl_available(), reason="checks the message of a torch built without NCCL")
def test_nccl_without_a_cuda_build_says_what_to_do() -> None:
    with pytest.raises(RuntimeError, match=_literal("Use backend='gloo' to run on the CPU")):
        launch(rank_and_size, 2, backend="nccl")


def test_nccl_without_enough_gpus_says_what_to_do(monkeypatch) -> None:
    monkeypatch.setattr(call, "_gpu_count", lambda: 1)
    monkeypatch.setattr(dist, "is_nccl_available", lambda: True)
    with pytest.raises(RuntimeError) as info:
        launch(rank_and_size, 4, backend="nccl")
    assert str(info.value) == (
        "backend='nccl' needs one GPU per rank, but world_size=4 and this machine has 1 GPU. "
        "To go on, use world_size=1 or fewer, use backend='gloo' to run every rank on the CPU, "
        "or backend='auto' to choose for you."
    )
    assert call.resolve_backend("auto", 4) == "gloo"
    assert call.resolve_backend("auto", 1) == "nccl"


def test_get_device_outside_a_rank_explains_itself() -> None:
    with pytest.raises(RuntimeError, match="call it inside the function you pass to launch"):
        get_device()


def test_the_launching_process_never_initialises_cuda() -> None:
    launch(rank_and_size, 2)
    assert not torch.cuda.is_initialized()


def test_ranks_are_forked_from_a_fresh_interpreter_not_from_the_caller() -> None:
    """CUDA-safe start: the caller is never forked; the fork server was exec'd, not forked."""
    server = get_server()
    parents = launch(lambda rank, world_size: os.getppid(), 2)
    assert parents == [server.process.pid] * 2
    server_process = psutil.Process(server.process.pid)
    assert server_process.ppid() == os.getpid()
    assert server_process.cmdline()[:2] == [sys.executable, "-c"]
    assert "from launcher.forkserver import serve" in server_process.cmdline()[2]


# -- results and errors -----------------------------------------------------------------------


def _warn(rank: int, world_size: int) -> None:
    warnings.warn("from a rank", FutureWarning, stacklevel=1)


def test_ranks_follow_the_callers_warning_filters(capfd) -> None:
    launch(_warn, 1)
    assert "FutureWarning: from a rank" in capfd.readouterr().err
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="from a rank")
        launch(_warn, 1)
    assert "from a rank" not in capfd.readouterr().err


def test_a_large_result_comes_back_whole() -> None:
    big = launch(lambda rank, world_size: torch.full((4_000_000,), float(rank)), 2)
    assert [t.shape[0] for t in big] == [4_000_000, 4_000_000]
    assert [t.sum().item() for t in big] == [0.0, 4_000_000.0]


class UnpicklableError(Exception):
    def __init__(self, lock: threading.Lock) -> None:
        super().__init__("carries a lock")
        self.lock = lock


def _raise_unpicklable(rank: int, world_size: int) -> None:
    raise UnpicklableError(threading.Lock())


def test_an_exception_with_an_attribute_that_cannot_be_copied_keeps_its_type() -> None:
    with pytest.raises(LaunchError) as info:
        launch(_raise_unpicklable, 1)
    exception = info.value.failures[0].exception
    assert type(exception) is UnpicklableError and exception.args == ("carries a lock",)
    assert not hasattr(exception, "lock")  # the one thing that could not come back
    assert "rank 0 of 1 raised UnpicklableError: carries a lock" in str(info.value)


class UnbuildableError(Exception):
    def __new__(cls, *, code: int):  # neither pickle nor a bare __new__ can make one
        return super().__new__(cls)

    def __init__(self, *, code: int) -> None:
        super().__init__(f"code {code}")

    def __reduce__(self):
        raise TypeError("not today")


def _raise_unbuildable(rank: int, world_size: int) -> None:
    raise UnbuildableError(code=7)


def test_an_exception_that_cannot_be_rebuilt_gets_a_stand_in() -> None:
    with pytest.raises(LaunchError) as info:
        launch(_raise_unbuildable, 1)
    failure = info.value.failures[0]
    assert isinstance(failure.exception, RankException)
    assert failure.exception.type_name == "UnbuildableError"
    assert "rank 0 of 1 raised UnbuildableError: code 7" in str(info.value)


class TwoArgumentError(Exception):
    def __init__(self, code: int, detail: str) -> None:
        super().__init__(f"error {code}: {detail}")
        self.code = code


def _raise_two_arguments(rank: int, world_size: int) -> None:
    raise TwoArgumentError(rank, "no shard")


def test_an_exception_whose_init_takes_other_arguments_keeps_its_type() -> None:
    """pickle rebuilds an exception as ``type(*args)``, which this class's __init__ refuses."""
    with pytest.raises(LaunchError) as info:
        launch(_raise_two_arguments, 2)
    for rank, exception in info.value.exceptions.items():
        assert type(exception) is TwoArgumentError
        assert exception.code == rank and str(exception) == f"error {rank}: no shard"
    try:
        raise info.value.exceptions[1]
    except TwoArgumentError:  # what a student would write
        pass


class RankQuotingError(Exception):
    def __str__(self) -> str:  # works in the rank only: outside, there is no process group
        return f"on rank {dist.get_rank()}"


def _raise_rank_quoting(rank: int, world_size: int) -> None:
    raise RankQuotingError()


def test_an_exception_whose_str_fails_outside_the_rank_is_still_reported() -> None:
    with pytest.raises(LaunchError) as info:
        launch(_raise_rank_quoting, 2)
    message = str(info.value)
    assert "rank 0 of 2 raised RankQuotingError: on rank 0" in message
    assert "rank 1 of 2 raised RankQuotingError: on rank 1" in message
    assert type(info.value.failures[0].exception) is RankQuotingError


def test_the_original_exception_type_is_reachable() -> None:
    with pytest.raises(LaunchError) as info:
        launch(lambda rank, world_size: [][rank], 2)
    assert {r: type(e) for r, e in info.value.exceptions.items()} == {0: IndexError, 1: IndexError}


def _raise_a_local_exception_class(rank: int, world_size: int) -> None:
    class ShardError(Exception):  # defined where pickle cannot find it by name
        pass

    raise ShardError(f"no shard for rank {rank}")


def test_an_exception_class_defined_in_the_function_keeps_its_report() -> None:
    with pytest.raises(LaunchError) as info:
        launch(_raise_a_local_exception_class, 2)
    message = str(info.value)
    assert "rank 0 of 2 raised ShardError: no shard for rank 0" in message
    assert "rank 1 of 2 raised ShardError: no shard for rank 1" in message
    assert 'raise ShardError(f"no shard for rank {rank}")' in message


def _exit_together(rank: int, world_size: int) -> None:
    dist.barrier()  # so that they really do die at the same moment
    os._exit(3)


def test_ranks_dying_together_are_all_named() -> None:
    with pytest.raises(LaunchError) as info:
        launch(_exit_together, 4)
    assert [f.rank for f in info.value.failures] == [0, 1, 2, 3]
    assert all(f.exitcode == 3 for f in info.value.failures)


def test_a_warning_category_defined_in_a_notebook_is_filtered_in_the_ranks(capfd) -> None:
    category = type("NotebookWarning", (UserWarning,), {"__module__": "__main__"})

    def warns(rank: int, world_size: int) -> int:
        warnings.warn("from the notebook's category", category, stacklevel=1)
        return rank

    warns = _as_notebook_function(warns)
    assert launch(warns, 2) == [0, 1]
    assert capfd.readouterr().err.count("NotebookWarning: from the notebook's category") == 2
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=category)
        assert launch(warns, 2) == [0, 1]
    assert "from the notebook's category" not in capfd.readouterr().err


def _receive_from_anyone(rank: int, world_size: int) -> list[float]:
    t = torch.zeros(1)
    if rank == 0:
        got = []
        for _ in range(2):
            dist.recv(t)  # from any source
            got.append(t.item())
        return sorted(got)
    if rank == 2:
        time.sleep(2.5)  # long enough for a look to see rank 1 returned and rank 0 waiting
    dist.send(torch.tensor([float(rank)]), dst=0)
    return []


def test_a_recv_from_any_source_is_not_taken_for_a_deadlock() -> None:
    assert launch(_receive_from_anyone, 3)[0] == [1.0, 2.0]


def _start_a_sleeper(rank: int, world_size: int) -> int:
    return subprocess.Popen(["sleep", "60"]).pid  # never waited for


def test_programs_a_rank_starts_do_not_outlive_the_launch() -> None:
    pids = launch(_start_a_sleeper, 2)
    time.sleep(0.2)
    alive = [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
    assert alive == []


@pytest.mark.timeout(120)
def test_the_largest_world_size_runs() -> None:
    assert launch(rank_and_size, 64, check_collectives=False, timeout=60) == [(r, 64) for r in range(64)]


def test_an_unsendable_result_is_reported_as_the_ranks_error() -> None:
    with pytest.raises(LaunchError, match="cannot be sent back"):
        launch(lambda rank, world_size: threading.Lock(), 2)


def test_a_launch_timeout_is_also_a_timeout_error() -> None:
    with pytest.raises(TimeoutError):
        launch(lambda rank, world_size: time.sleep(30), 2, timeout=1)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_fork_server_that_cannot_start_says_why_and_leaks_nothing(tmp_path: Path, monkeypatch) -> None:
    broken = tmp_path / "torch"
    broken.mkdir()
    (broken / "__init__.py").write_text("raise ImportError('a broken torch, for this test')\n")
    launcher.shutdown()
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the server imports this torch, not ours
    before = _open_fds()
    for _ in range(3):
        with pytest.raises(ForkServerError, match="a broken torch, for this test"):
            launch(rank_and_size, 2)
    assert _open_fds() == before
    assert psutil.Process().children() == []
    monkeypatch.undo()
    assert launch(rank_and_size, 2) == [(0, 2), (1, 2)]


def test_an_interrupt_while_the_fork_server_starts_leaves_nothing_behind() -> None:
    launcher.shutdown()
    before = _open_fds()
    # As Jupyter's stop button does: SIGINT to the main thread, here while the server imports torch.
    timer = threading.Timer(0.5, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT))
    # A kernel turns SIGINT into KeyboardInterrupt; pytest started in the background by a shell
    # (as a CI script may start it) inherits SIGINT ignored, and Python then leaves it ignored.
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    # Python drops a KeyboardInterrupt raised in a finalizer ("Exception ignored in ..."): with the
    # garbage earlier tests leave, a collection run by chance during the launch could swallow it.
    gc.collect()
    gc.disable()
    try:
        timer.start()
        started = time.perf_counter()
        launch(rank_and_size, 2)
    except KeyboardInterrupt:
        pass
    else:
        timer.join()
        pytest.fail(f"launch returned after {time.perf_counter() - started:.2f} s without being interrupted")
    finally:
        gc.enable()
        signal.signal(signal.SIGINT, handler)
    assert time.perf_counter() - started < 2.0
    assert psutil.Process().children() == []
    assert _open_fds() == before
    assert launch(rank_and_size, 2) == [(0, 2), (1, 2)]


def test_a_dead_fork_server_is_replaced_on_the_next_launch() -> None:
    server = get_server()
    os.kill(server.process.pid, signal.SIGKILL)
    server.process.wait()
    assert launch(rank_and_size, 2) == [(0, 2), (1, 2)]
    assert get_server() is not server


def test_shutdown_stops_the_fork_server() -> None:
    launch(rank_and_size, 1)
    launcher.shutdown()
    assert psutil.Process().children() == []
    assert launch(rank_and_size, 1) == [(0, 1)]


# -- torchrun ---------------------------------------------------------------------------------


def test_under_torchrun_each_process_runs_its_own_rank(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(
        textwrap.dedent(
            """
            import torch, torch.distributed as dist
            from launcher import get_device, launch

            def all_reduce_demo(rank, world_size):
                t = torch.tensor([0.0, 1, 2, 3], device=get_device()) + rank
                dist.all_reduce(t)
                return rank, world_size, dist.get_backend(), t.tolist()

            result = launch(all_reduce_demo, world_size=2)
            with open(f"result-{result[0]}.txt", "w") as out:  # one file per rank: no interleaving
                out.write(repr(result))
            """
        )
    )
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR")}
    env["PYTHONPATH"] = str(REPO)
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", str(script)]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    results = [(tmp_path / f"result-{rank}.txt").read_text() for rank in range(2)]
    assert results == [
        "(0, 2, 'gloo', [1.0, 3.0, 5.0, 7.0])",
        "(1, 2, 'gloo', [1.0, 3.0, 5.0, 7.0])",
    ]


# -- helpers ----------------------------------------------------------------------------------


def _literal(text: str) -> str:
    import re

    return re.escape(text)


def _as_notebook_function(fn):
    """A copy of ``fn`` that cloudpickle pickles by value, as it does functions from a notebook."""
    import types

    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__module__ = "__main__"
    return copy


def test_launch_in_a_timeout_message_names_the_timeout() -> None:
    with pytest.raises(LaunchHang, match=_literal("pass a larger timeout to launch (it was 1 seconds)")):
        launch(lambda rank, world_size: time.sleep(30), 1, timeout=1)


# -- threads, output and options --------------------------------------------------------------


def _threads(rank: int, world_size: int) -> int:
    return torch.get_num_threads()


def test_each_rank_has_the_threads_the_caller_asks_for_at_every_launch(monkeypatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cpus = len(os.sched_getaffinity(0))
    assert launch(_threads, 2) == [max(1, cpus // 2)] * 2  # the cores shared out
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # set after the fork server started
    assert launch(_threads, 2) == [3, 3]
    assert launch(_threads, 2, num_threads=2) == [2, 2]  # the argument wins
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert launch(_threads, 1) == [1]


@pytest.mark.parametrize(
    "variable, num_threads, words",
    [
        ("abc", None, "OMP_NUM_THREADS is 'abc', which is not a number of threads"),
        ("0", None, "OMP_NUM_THREADS is '0'"),
        (None, 0, "num_threads must be a whole number of threads, 1 or more; got 0"),
        (None, 1.5, "num_threads must be a whole number of threads, 1 or more; got 1.5"),
    ],
)
def test_bad_thread_counts_are_refused(variable, num_threads, words, monkeypatch, no_rank_may_start) -> None:
    if variable is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", variable)
    with pytest.raises(ValueError, match=_literal(words)):
        launch(rank_and_size, 2, num_threads=num_threads)


def _receives_in_a_helper_thread(rank: int, world_size: int) -> float:
    """Correct, but the main thread sends first on both ranks: its recv is in another thread."""
    got = torch.zeros(1)
    helper = threading.Thread(target=lambda: (time.sleep(1.5), dist.recv(got, src=1 - rank)))
    helper.start()
    dist.send(torch.tensor([float(rank)]), dst=1 - rank)
    helper.join()
    return got.item()


def test_a_rank_whose_other_thread_will_unblock_it_is_not_called_deadlocked() -> None:
    assert launch(_receives_in_a_helper_thread, 2) == [1.0, 0.0]


def _all_send_with_an_idle_thread(rank: int, world_size: int) -> None:
    threading.Thread(target=time.sleep, args=(30,), name="idle helper", daemon=True).start()
    dist.send(torch.ones(1), dst=1 - rank)


def test_a_hang_with_other_threads_alive_is_not_claimed_as_proven_and_shows_them() -> None:
    with pytest.raises(LaunchHang) as info:
        launch(_all_send_with_an_idle_thread, 2, timeout=2)
    message = str(info.value)
    assert message.startswith("the ranks did not finish within timeout=2s")
    assert "in a circle" not in message
    assert "its thread 'idle helper' is at:" in message
    assert "ranks 0, 1 have other threads running, so launch cannot tell" in message


def _rank_0_all_reduces_alone(rank: int, world_size: int) -> None:
    if rank == 0:
        dist.all_reduce(torch.ones(1))


def test_a_hang_says_which_ranks_returned_and_where_the_others_are_blocked() -> None:
    with pytest.raises(LaunchHang) as info:
        launch(_rank_0_all_reduces_alone, 2, timeout=10)
    assert info.value.returned == [1]
    assert info.value.blocked_in == {0: "all_reduce"}


def _progress(rank: int, world_size: int) -> None:
    for step in range(3):
        print(f"step {step}", end="\r", flush=True)
    print("done")


def test_a_progress_line_keeps_its_rank_prefix_on_every_rewrite(capsys) -> None:
    launch(_progress, 1)
    assert capsys.readouterr().out == "[rank 0] step 0\r[rank 0] step 1\r[rank 0] step 2\r[rank 0] done\n"


def test_timeout_may_be_a_numpy_number() -> None:
    numpy = pytest.importorskip("numpy")
    assert launch(rank_and_size, 2, timeout=numpy.int64(5)) == [(0, 2), (1, 2)]
    assert launch(rank_and_size, 2, timeout=numpy.float32(5.5)) == [(0, 2), (1, 2)]


def _needs_a_timeout(rank: int, world_size: int, timeout: float) -> float:
    return timeout


def _has_a_timeout(rank: int, world_size: int, timeout: float = 1.0) -> float:
    return timeout


def test_a_function_with_its_own_timeout_parameter_is_told_how_to_receive_it() -> None:
    with pytest.raises(TypeError, match=_literal("launch functools.partial(_needs_a_timeout, timeout=...)")):
        launch(_needs_a_timeout, 2)
    assert launch(functools.partial(_needs_a_timeout, timeout=5), 2) == [5, 5]
    with pytest.warns(
        UserWarning, match=_literal("_has_a_timeout's own parameter timeout keeps its default")
    ):
        assert launch(_has_a_timeout, 2, timeout=5) == [1.0, 1.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert launch(_has_a_timeout, 2) == [1.0, 1.0]  # nothing to warn about


def test_a_partial_that_already_gives_the_option_is_not_warned_about() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert launch(functools.partial(_has_a_timeout, timeout=5), 2, timeout=20) == [5, 5]


class RankStampedError(Exception):
    def __init__(self, message: str) -> None:  # works only where there is a process group
        super().__init__(f"[rank {dist.get_rank()}] {message}")


def _raise_rank_stamped(rank: int, world_size: int) -> None:
    raise RankStampedError("no shard")


def test_an_exception_whose_init_needs_the_process_group_keeps_its_type() -> None:
    with pytest.raises(LaunchError) as info:
        launch(_raise_rank_stamped, 2)
    for rank, exception in info.value.exceptions.items():
        assert type(exception) is RankStampedError and str(exception) == f"[rank {rank}] no shard"


def _environment_threads(rank: int, world_size: int) -> tuple[str, str]:
    return os.environ["OMP_NUM_THREADS"], os.environ["MKL_NUM_THREADS"]


def test_programs_a_rank_starts_see_its_thread_count() -> None:
    assert launch(_environment_threads, 2, num_threads=3) == [("3", "3")] * 2


def _line_end_split_between_writes(rank: int, world_size: int) -> None:
    os.write(1, b"half a line end\r")
    time.sleep(0.3)  # long enough for the launching process to relay the first write alone
    os.write(1, b"\nnext\n")


def test_a_line_end_split_between_two_writes_is_one_line_end(capsys) -> None:
    launch(_line_end_split_between_writes, 1)
    assert capsys.readouterr().out == "[rank 0] half a line end\r\n[rank 0] next\n"


def _train_with_ddp(rank: int, world_size: int) -> list[float]:
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 4))
    model(torch.ones(2, 4) * rank).sum().backward()
    return model.module.weight.grad.sum(dim=0).tolist()


def test_torchs_ddp_works_beside_the_collective_checks() -> None:
    """torch 2.13's DDP crashes on a group wrapped for the checks; launch gives it a plain one."""
    results = launch(_train_with_ddp, 3)  # check_collectives=True, the default
    # Each weight's gradient is its input summed over 2 rows, 2 x rank, averaged over the ranks:
    # 2; and 4 such rows summed make 8, on every rank.
    assert results == [[8.0] * 4] * 3


def test_gloos_own_connection_notes_are_not_relayed(capsys) -> None:
    # Older torch (2.8) has Gloo print one as each rank connects, at every launch.
    printer = OutputPrinter()
    note = b"[Gloo] Rank 1 is connected to 3 peer ranks. Expected number of connected peer ranks is : 3\n"
    printer.feed(1, "out", note + b"step 0\n")
    printer.feed(1, "err", note)
    printer.flush()
    assert capsys.readouterr() == ("[rank 1] step 0\n", "")


def _fails_at_once(rank: int, world_size: int) -> None:
    raise ValueError(f"rank {rank} gives up")


def test_a_launch_whose_every_rank_failed_ends_without_waiting_for_more(monkeypatch) -> None:
    # After a rank fails, the others get a moment to report errors of their own; once every rank
    # has, there is nothing left to wait for.
    monkeypatch.setattr("launcher.supervise.FAILURE_GRACE_S", 60.0)
    start = time.monotonic()
    with pytest.raises(LaunchError) as caught:
        launch(_fails_at_once, 3, timeout=60)
    assert sorted(caught.value.exceptions) == [0, 1, 2]
    assert time.monotonic() - start < machine.scaled(20)
