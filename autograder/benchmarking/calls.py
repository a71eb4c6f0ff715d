"""Checks of the call that runs one collective: which collective, on which tensors, and when it
returns.

Inside each rank the student's ``collective_call`` is given a stand-in GPU (`standin`), so that a
tensor made on the CPU shows, and what making the call and calling it do is recorded. A call must
run exactly its collective on float32 tensors of the expected sizes, on the device given, and
return as a blocking call does, once the collective has finished as far as the host can tell (on
Gloo, finished; on NCCL, queued on the GPU's stream, for the benchmark's synchronize to wait for):
a probe makes one rank late and checks, on Gloo, that the others' calls waited for it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist

from ..checks import counted, describe_event, fail, run_ranks
from .recording import VIEWS_AND_COPIES, DeviceTimeline, dtypes, is_collective, off_the_gpu
from .standin import StandInGpu

# For each collective: the c10d operations that do it (the tensor form and the list form), as
# the dispatcher names them.
OPERATIONS = {
    "all_reduce": ("allreduce_",),
    "broadcast": ("broadcast_",),
    "reduce": ("reduce_",),
    "all_gather": ("_allgather_base_", "allgather_"),
    "reduce_scatter": ("_reduce_scatter_base_", "reduce_scatter_"),
    "gather": ("gather_",),
    "scatter": ("scatter_",),
    "all_to_all": ("alltoall_base_", "alltoall_"),
}

# How long the late rank of the probe waits before it calls (seconds).
PROBE_DELAY = 0.05


def _probe(rank: int, world_size: int, name: str, run: Callable[[], object], key: str) -> bool | None:
    """Make one rank late, and say whether another rank's call, which needs the late one's data,
    came back only after the late rank had called too (None on the ranks that do not look)."""
    if world_size == 1:
        return None
    store = dist.distributed_c10d._get_default_store()
    # A broadcast or a scatter needs the root (rank 0); the others need every rank's data, and a
    # reduce or a gather reaches the root (rank 0) last: that is the rank that looks.
    late, looks = (0, 1) if name in ("broadcast", "scatter") else (1, 0)
    dist.barrier()
    if rank == late:
        time.sleep(PROBE_DELAY)
        store.set(key, "called")
    run()
    return store.check([key]) if rank == looks else None


def _calls_on_rank(rank: int, world_size: int, make: Callable, cases: list[tuple[str, int]]) -> list:
    """Inside a rank: make each collective's call for a stand-in GPU, probe whether it waits for
    the collective, and record what making it and calling it twice do."""
    found = []
    probed = set()
    with StandInGpu() as gpu:
        for name, size in cases:
            made = DeviceTimeline(gpu)
            with made:
                run = make(name, size, world_size, torch.device("cuda", rank))
            waited = None
            if name not in probed:
                probed.add(name)
                waited = _probe(rank, world_size, name, run, f"course-probe-{name}-{size}")
            called = DeviceTimeline(gpu)
            with called:
                run()
                run()
            found.append((list(called.recorded()), waited))
    return found


def check_collective_call(
    collective_call: Callable,
    expected: Callable[[str, int, int, int], list[int]],
    names: Sequence[str],
    sizes: Sequence[int],
    world_sizes: Sequence[int] = (4,),
) -> None:
    """Check ``collective_call(name, size_bytes, world_size, device)`` on every rank.

    ``expected(name, rank, world_size, chunk)`` gives, for the rank, the number of elements in
    each tensor argument of the collective (as the dispatcher sees it, input and output), where
    ``chunk = size_bytes // (4 * world_size)``. Each call must issue exactly that collective, on
    float32 tensors on the device given, allocated when the call is made, do nothing else, and
    return as a blocking call does (on Gloo, once the collective has finished).
    """
    __tracebackhide__ = True
    cases = [(name, size) for name in names for size in sizes]
    for world_size in world_sizes:
        # Without the launcher's collective checks: they add a blocking exchange before every
        # collective, which would make a call that does not wait for its collective wait anyway.
        per_rank = run_ranks(
            _calls_on_rank,
            world_size,
            collective_call,
            cases,
            what="collective_call",
            check_collectives=False,
        )
        for rank, found in enumerate(per_rank):
            for (name, size), (called, waited) in zip(cases, found, strict=True):
                chunk = size // (4 * world_size)
                what = (
                    f"collective_call({name!r}, {size}, world_size={world_size}, device=cuda:{rank}) on "
                    f"rank {rank} of {counted(world_size, 'rank')}"
                )
                # What taking the whole array for each rank's chunk gives, a common slip.
                whole = expected(name, rank, world_size, chunk * world_size) if world_size > 1 else None
                _check_one_call(what, name, called, expected(name, rank, world_size, chunk), whole)
                if waited is False:
                    fail(
                        f"{what}: calling what it returns came back before the other ranks had even called "
                        f"{name} (the test made them {PROBE_DELAY * 1e3:.0f} ms late), so the collective had "
                        "not finished. A collective started with async_op=True returns a handle at once: "
                        "wait on it inside the call (on NCCL that queues the wait on the GPU's stream, where "
                        "the benchmark's synchronize() waits for it), or a benchmark times only the start "
                        "of the collective."
                    )


def _check_one_call(
    what: str, name: str, called: list[tuple], sizes: list[int], whole: list[int] | None = None
) -> None:
    __tracebackhide__ = True
    collectives = [e for e in called if is_collective(e)]
    extra = [e for e in called if e[0] == "op" and e[1] != "c10d" and e[2] not in VIEWS_AND_COPIES]
    if extra:
        fail(
            f"{what}: calling what it returns also runs {describe_event(extra[0])}. Make the tensors once, "
            "in collective_call; the call itself must do the collective and nothing else, since it is "
            "what the benchmark times."
        )
    if len(collectives) != 2:
        fail(
            f"{what}: calling what it returns twice issued {len(collectives)} collectives, not one per call."
        )
    event = collectives[0]
    op, args = event[2], event[3]
    if op not in OPERATIONS[name]:
        fail(f"{what}: calling what it returns issued {op}, which is not {name}.")
    numels = [n for n in args if n is not None]
    if numels != sizes:
        fail(
            f"{what}: the {name} moved tensors of {numels} elements (its arguments as torch passes them "
            f"on); expected {sizes}."
            + (
                " That is what you get if you make each rank's chunk the whole array, world_size times "
                "too many elements."
                if whole is not None and numels == whole
                else ""
            )
            + " The whole array is world_size x chunk elements, with "
            "chunk = size_bytes // (4 * world_size) float32 elements."
        )
    wrong = sorted({str(d) for d in dtypes(event) if d != torch.float32})
    if wrong:
        fail(
            f"{what}: the {name} carried {', '.join(wrong)} tensors; the benchmark asks for float32. "
            "Another dtype moves another number of bytes per element (int64 twice as many), so every "
            "bandwidth computed from the size would be wrong."
        )
    if off_the_gpu(event):
        fail(
            f"{what}: the {name} carried a tensor that is not on the device it was given (the test gave a "
            "stand-in GPU): make every tensor the collective uses on that device, or move it there. "
            "NCCL only carries tensors on the GPU."
        )
