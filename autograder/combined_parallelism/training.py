"""Notebook 08's checks of data x tensor parallel training: the student's by hand, with process
groups (`check_dp_tp`), and torch's, with a DeviceMesh, `fully_shard` and `parallelize_module`
(`check_torch_2d`). Both must equal one process training on the whole batch; what each rank read
and which group each collective ran on are recorded in the ranks and checked here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..checks import allclose, counted, fail, fresh_seed, run_ranks
from ..data_parallel.training import RowsRead
from .groups import GroupLog
from .mesh import reference_coords, reference_groups
from .model import DIM, make_data, make_model, tp_slices, train_alone

_type = type


def _article(name: str) -> str:
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _near(a: torch.Tensor, b: torch.Tensor) -> bool:
    return allclose(a.double(), b.double(), rtol=1e-4, atol=1e-5)


def _run(
    rank: int, world_size: int, train: Callable, dp: int, tp: int, rows: int, steps: int, lr: float, seed: int
):
    log: list = []
    dataset = RowsRead(*make_data(rows, seed), log)
    with GroupLog() as groups:
        params = train(rank, world_size, dp, tp, lambda: make_model(seed + 1), dataset, steps, lr)
    if isinstance(params, (list, tuple)):
        params = [p.detach().clone() if isinstance(p, torch.Tensor) else p for p in params]
    return params, sorted({row for kind, row in log if kind == "read"}), groups.summary()


def _params_mistake(
    what: str, got: Any, expected: list[torch.Tensor], mistakes: dict[str, list]
) -> str | None:
    """None if ``got`` holds the expected parameters; else what is wrong with them (a named mistake
    where one fits, else "")."""
    __tracebackhide__ = True
    if not isinstance(got, (list, tuple)) or len(got) != len(expected):
        fail(f"{what}: return a list of the {len(expected)} parameters, got {got!r:.200}")
    for p, e in zip(got, expected, strict=True):
        if _type(p) is not torch.Tensor or p.shape != e.shape:
            shape = tuple(p.shape) if isinstance(p, torch.Tensor) else _type(p).__name__
            fail(f"{what}: a parameter of shape {shape} where {tuple(e.shape)} was expected.")
    if all(_near(p, e) for p, e in zip(got, expected, strict=True)):
        return None
    for mistake, values in mistakes.items():
        if all(_near(p, e) for p, e in zip(got, values, strict=True)):
            return mistake
    return ""


def _expect_rows(what: str, read: list[list[int]], dp: int, tp: int, rows: int) -> None:
    __tracebackhide__ = True
    shares, sizes = {}, {"dp": dp, "pp": 1, "tp": tp}
    for rank, got in enumerate(read):
        d = reference_coords(rank, {"dp": dp, "pp": 1, "tp": tp})["dp"]
        if len(got) != rows // dp:
            fail(
                f"{what}: rank {rank} read {len(got)} of the {rows} rows; "
                f"each data-parallel replica reads {rows // dp}."
            )
        if shares.setdefault(d, got) != got:
            fail(
                f"{what}: with TP innermost, ranks {reference_groups(sizes, 'tp')[d]} hold shards of one "
                "copy of the model and must compute on the same rows, but they read different ones."
            )
    covered = sorted(r for share in shares.values() for r in share)
    if covered != list(range(rows)):
        fail(
            f"{what}: the data-parallel replicas' rows should cover the batch once each; they read {covered}."
        )


def _expect_groups(
    what: str,
    rank: int,
    calls: list,
    dp: int,
    tp: int,
    steps: int,
    rows: int,
    local: int,
    torch_2d: bool,
    gradient_sizes: frozenset = frozenset(),
) -> None:
    __tracebackhide__ = True
    sizes = {"dp": dp, "pp": 1, "tp": tp}
    tp_group = next(tuple(g) for g in reference_groups(sizes, "tp") if rank in g)
    dp_group = next(tuple(g) for g in reference_groups(sizes, "dp") if rank in g)
    world = tuple(range(dp * tp))
    on = {tp_group: [], dp_group: []}
    for name, group, numels in calls:
        if group == world and world not in on:
            fail(
                f"{what}: rank {rank} ran {_article(name)} on the whole world {list(world)}, not on "
                "one axis's group: it mixes what the other replicas (or the other shards) hold into "
                "this one's."
            )
        if group not in on:
            fail(
                f"{what}: rank {rank} ran {_article(name)} on ranks {list(group)}, which are neither its "
                f"tensor-parallel group {list(tp_group)} nor its data-parallel group {list(dp_group)}."
            )
        on[group].append((name, sum(numels)))
        if (
            not torch_2d
            and tp > 1
            and group == tp_group
            and name == "all_reduce"
            and sum(numels) in gradient_sizes
            and sum(numels) != rows // dp * DIM
        ):
            fail(
                f"{what}: rank {rank} ran an all_reduce of {sum(numels)} elements, the size of one of its "
                f"gradients, on its tensor-parallel group {list(tp_group)}"
                f"{', here the whole world' if tp_group == world else ''}: it mixes what the other shards "
                "hold into this one's. A shard's gradient is whole on its own rank; only the data-parallel "
                "replicas' gradients are averaged."
            )
    tp_reduces = [n for name, n in on[tp_group] if name == "all_reduce" and n == rows // dp * DIM]
    if tp > 1 and len(tp_reduces) < steps:
        fail(
            f"{what}: rank {rank} ran {counted(len(tp_reduces), 'all_reduce')} of the layer's output on its "
            f"tensor-parallel group {list(tp_group)} in {counted(steps, 'step')}: one a forward, at least."
        )
    if dp > 1 and not torch_2d:
        carried = sum(n for name, n in on[dp_group] if name == "all_reduce")
        if carried < steps * local:
            fail(
                f"{what}: rank {rank}'s all_reduces on its data-parallel group {list(dp_group)} carried "
                f"{carried} elements in {counted(steps, 'step')}; its gradients are {local} elements a step."
            )
    if dp > 1 and torch_2d:
        names = {name for name, _ in on[dp_group]}
        if not {"all_gather", "reduce_scatter"} <= names:
            fail(
                f"{what}: rank {rank} ran no all_gather and reduce_scatter on its data-parallel group "
                f"{list(dp_group)}: are the parameters sharded by fully_shard over the mesh's dp dimension?"
            )


def _check(
    train: Callable,
    shapes: Sequence[tuple[int, int]],
    rows_per_replica: int,
    steps: int,
    lr: float,
    torch_2d: bool,
) -> None:
    __tracebackhide__ = True
    name = getattr(train, "__name__", "train")
    seed = fresh_seed()
    for dp, tp in shapes:
        rows = rows_per_replica * dp
        data, targets = make_data(rows, seed)
        full = train_alone(seed + 1, data, targets, steps, lr)
        wrong_divisor = train_alone(seed + 1, data, targets, steps, lr / tp)
        ranks = counted(dp * tp, "rank")
        what = f"{name} with dp={dp}, tp={tp} ({ranks}), {rows} rows, {counted(steps, 'step')}"
        results = run_ranks(_run, dp * tp, train, dp, tp, rows, steps, lr, seed, what=what, timeout=40)
        _expect_rows(what, [read for _, read, _ in results], dp, tp, rows)
        local = sum(p.numel() for p in tp_slices(full, 0, tp))
        for rank, (params, _, calls) in enumerate(results):
            index = reference_coords(rank, {"dp": dp, "pp": 1, "tp": tp})["tp"]
            expected = full if torch_2d else tp_slices(full, index, tp)
            mistakes = {}
            if not torch_2d:
                for other in range(tp):
                    if other != index:
                        mistakes[
                            f"rank {rank} holds tensor-parallel shard {other}, but its tp coordinate is "
                            f"{index} (tensor parallelism is the innermost axis)"
                        ] = tp_slices(full, other, tp)
            twice = " (or twice over the replicas: here the same)" if tp == dp else ""
            mistakes[
                f"the gradients were averaged over the world size{twice}, not once over the data-parallel "
                "replicas"
            ] = wrong_divisor if torch_2d else tp_slices(wrong_divisor, index, tp)
            mistake = _params_mistake(f"{what}, rank {rank}", params, expected, mistakes)
            if mistake:
                fail(
                    f"{what}, rank {rank}: the parameters are not those of one process on the whole batch: "
                    f"{mistake}."
                )
            # Which group each collective ran on names most other mistakes; then the result itself.
            sizes = frozenset(p.numel() for p in tp_slices(full, index, tp))
            _expect_groups(what, rank, calls, dp, tp, steps, rows, local, torch_2d, sizes)
            if mistake is not None:
                fail(
                    f"{what}, rank {rank}: the parameters are not those one process reaches on the whole "
                    "batch."
                )


def check_dp_tp(
    train: Callable,
    shapes: Sequence[tuple[int, int]] = ((2, 2),),
    rows_per_replica: int = 3,
    steps: int = 3,
    lr: float = 0.1,
) -> None:
    """Check ``train(rank, world_size, dp, tp, make_model, dataset, steps, lr)`` for each (dp, tp)
    in ``shapes``: each rank's tensor-parallel shards equal to one process's trained MLP, every
    replica reading its own rows, TP's all_reduce on the TP group and the gradients' on the DP group."""
    __tracebackhide__ = True
    _check(train, shapes, rows_per_replica, steps, lr, torch_2d=False)


def check_torch_2d(
    train: Callable,
    shapes: Sequence[tuple[int, int]] = ((2, 2),),
    rows_per_replica: int = 3,
    steps: int = 2,
    lr: float = 0.1,
) -> None:
    """Check ``train(...)`` as `check_dp_tp` does, for torch's 2D: it returns the whole parameters
    (``full_tensor()``), and FSDP's all_gather and reduce_scatter run on the data-parallel group."""
    __tracebackhide__ = True
    _check(train, shapes, rows_per_replica, steps, lr, torch_2d=True)
