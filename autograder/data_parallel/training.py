"""Notebook 04's checks of data-parallel training: by hand and with torch's
DistributedDataParallel, the loss of an uneven shard, and one all_reduce for all the gradients."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ..checks import allclose, counted, fail, fresh_seed, run_ranks, tensors_equal
from ..comm import CommLog
from .model import _close, _compare, _params_like, _type, make_batch, make_mlp, mse, train_alone

# -- exercise: data parallelism by hand, and with torch's DistributedDataParallel ----------------


def _train_on_rank(
    rank: int, world_size: int, train: Callable, batch: int, steps: int, lr: float, seed: int
) -> tuple:
    rows: list[int] = []
    made: list[int] = []
    constructed = _count_ddp_models()

    def make_model() -> nn.Module:
        made.append(1)
        model = make_mlp(seed=seed + 1 + rank)  # each rank's own, as on separate GPUs
        model.register_forward_pre_hook(lambda module, inputs: rows.append(inputs[0].shape[0]))
        return model

    data, targets = make_batch(batch, seed=seed)
    with constructed as ddp_models:
        params = train(rank, world_size, make_model, data, targets, steps, lr)
    return params, rows, len(made), len(ddp_models)


@contextlib.contextmanager
def _count_ddp_models() -> Iterator[list[int]]:
    """Counts the DistributedDataParallel models constructed inside it."""
    cls = torch.nn.parallel.DistributedDataParallel
    real = cls.__init__
    made: list[int] = []

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        made.append(1)
        real(self, *args, **kwargs)

    cls.__init__ = init
    try:
        yield made
    finally:
        cls.__init__ = real


def check_data_parallel(
    train: Callable,
    world_sizes: Sequence[int] = (2,),
    batch: int = 8,
    steps: int = 3,
    lr: float = 0.1,
    with_torch_ddp: bool = False,
) -> None:
    """Check ``train(rank, world_size, make_model, data, targets, steps, lr)``: every rank ends with
    the parameters one process reaches training the whole batch with SGD, from rank 0's initial
    parameters, each rank having fed its model its own shard of the batch."""
    __tracebackhide__ = True
    name = getattr(train, "__name__", "train")
    seed = fresh_seed()
    data, targets = make_batch(batch, seed=seed)
    reference = train_alone(make_mlp(seed=seed + 1), data, targets, steps, lr)
    for world_size in world_sizes:
        what = f"{name} on {counted(world_size, 'rank')}, a batch of {batch}, {steps} steps"
        per_rank = run_ranks(_train_on_rank, world_size, train, batch, steps, lr, seed, what=name)
        shards = [len(s) for s in torch.arange(batch).tensor_split(world_size)]
        for rank, (params, rows, made, ddp_models) in enumerate(per_rank):
            if made != 1:
                fail(
                    f"{what}: rank {rank} called make_model() {made} times; call it once, for this rank's "
                    "model."
                )
            if with_torch_ddp and ddp_models != 1:
                fail(
                    f"{what}: rank {rank} made {ddp_models} DistributedDataParallel models; wrap its model "
                    "in one."
                )
            if not rows or any(r != shards[rank] for r in rows):
                fail(
                    f"{what}: rank {rank}'s model was fed batches of {sorted(set(rows))} rows; its shard of "
                    f"the batch has {shards[rank]}. Each rank computes on its own slice of the batch only."
                )
            _params_like(f"{what}: rank {rank}", params, reference)
        for rank, (params, *_) in enumerate(per_rank[1:], start=1):
            if not all(_close(p, q) for p, q in zip(params, per_rank[0][0], strict=True)):
                fail(
                    f"{what}: rank {rank}'s parameters differ from rank 0's. Every rank must start from "
                    "rank 0's "
                    "parameters (each made its own, from its own seed) and apply the same averaged gradients."
                )
        summed = train_alone(make_mlp(seed=seed + 1), data, targets, steps, lr * world_size)
        mistakes = {"sum the gradients over the ranks without dividing by the world size": summed}
        _compare(f"{what}: rank 0", per_rank[0][0], reference, mistakes if world_size > 1 else {})


# -- exercise: the loss of an uneven shard ---------------------------------------------------------


def _uneven_on_rank(
    rank: int, world_size: int, shard_loss: Callable, batch: int, steps: int, lr: float, seed: int
) -> list:
    model = make_mlp(seed=seed)
    data, targets = make_batch(batch, seed=seed + 1)
    x, y = data.tensor_split(world_size)[rank], targets.tensor_split(world_size)[rank]
    for _ in range(steps):
        model.zero_grad()
        loss = shard_loss(model(x), y, batch)
        if _type(loss) is not torch.Tensor or loss.dim() != 0 or not loss.requires_grad:
            raise TypeError(
                f"shard_loss returned {loss!r:.80}; it must return a 0-dimensional tensor with a graph"
            )
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                dist.all_reduce(p.grad)  # summed, as the exercise says
                p -= lr * p.grad
    return [p.detach().clone() for p in model.parameters()]


def _emulate_shards(loss: Callable, world_size: int, batch: int, steps: int, lr: float, seed: int) -> list:
    """What summing the ranks' gradients gives, computed in one process, for another loss."""
    model = make_mlp(seed=seed)
    data, targets = make_batch(batch, seed=seed + 1)
    for _ in range(steps):
        grads = [torch.zeros_like(p) for p in model.parameters()]
        for x, y in zip(data.tensor_split(world_size), targets.tensor_split(world_size), strict=True):
            model.zero_grad()
            loss(model(x), y, batch).backward()
            for g, p in zip(grads, model.parameters(), strict=True):
                g += p.grad
        with torch.no_grad():
            for p, g in zip(model.parameters(), grads, strict=True):
                p -= lr * g
    return [p.detach().clone() for p in model.parameters()]


def check_shard_loss(
    shard_loss: Callable, world_sizes: Sequence[int] = (3,), batch: int = 10, steps: int = 2, lr: float = 0.1
) -> None:
    """Check ``shard_loss(outputs, targets, global_count)`` in data-parallel training whose
    gradients are summed over the ranks: it must match one process on the whole batch, however
    unevenly the batch divides among the ranks."""
    __tracebackhide__ = True
    seed = fresh_seed()
    data, targets = make_batch(batch, seed=seed + 1)
    reference = train_alone(make_mlp(seed=seed), data, targets, steps, lr)
    for world_size in world_sizes:
        sizes = [len(s) for s in torch.arange(batch).tensor_split(world_size)]
        what = (
            f"training with shard_loss on {counted(world_size, 'rank')}, a batch of {batch} split as {sizes}"
        )
        per_rank = run_ranks(
            _uneven_on_rank, world_size, shard_loss, batch, steps, lr, seed, what="shard_loss"
        )
        _params_like(what, per_rank[0], reference)
        mistakes = {
            "take the mean over this rank's shard (every shard then weighs the same, whatever its size)": (
                _emulate_shards(lambda o, t, n: mse(o, t), world_size, batch, steps, lr, seed)
            ),
            "divide by the number of rows but not by the number of outputs in each": (
                _emulate_shards(lambda o, t, n: ((o - t) ** 2).sum() / n, world_size, batch, steps, lr, seed)
            ),
        }
        _compare(what, per_rank[0], reference, mistakes)


# -- exercise: one all_reduce for all the gradients ------------------------------------------------


def _rank_tensors(
    rank: int, shapes: Sequence[tuple[int, ...]], dtype: torch.dtype, seed: int
) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed + rank)
    return [torch.randn(shape, generator=generator).to(dtype) for shape in shapes]


def _flat_on_rank(
    rank: int, world_size: int, fn: Callable, shapes: list, dtype: torch.dtype, seed: int
) -> tuple:
    grads = _rank_tensors(rank, shapes, dtype, seed)
    originals = list(grads)  # in place means these tensors, whatever fn does to the list
    with CommLog() as log:
        fn(grads)
    return originals, log.summary()


def check_flat_all_reduce(
    fn: Callable,
    world_sizes: Sequence[int] = (2,),
    shapes: Sequence[tuple[int, ...]] = ((3, 4), (4,), ()),
    dtype: torch.dtype = torch.float32,
) -> None:
    """Check ``fn(grads)``: averages the tensors over the ranks, in place, with one all_reduce."""
    __tracebackhide__ = True
    total = sum(torch.Size(s).numel() for s in shapes)
    seed = fresh_seed()
    for world_size in world_sizes:
        name = getattr(fn, "__name__", "fn")
        what = f"{name} on {counted(world_size, 'rank')}, tensors of shapes {list(shapes)}, {dtype}"
        per_rank = run_ranks(
            _flat_on_rank, world_size, fn, list(shapes), dtype, seed, what="the flat all_reduce"
        )
        inputs = [_rank_tensors(r, shapes, dtype, seed) for r in range(world_size)]
        average = [sum(t[i].double() for t in inputs) / world_size for i in range(len(shapes))]
        for rank, (grads, summary) in enumerate(per_rank):
            calls = [numels for name, numels in summary["calls"] if name == "all_reduce"]
            if len(calls) != 1 or sum(calls[0]) != total:
                fail(
                    f"{what}: rank {rank} issued {len(calls)} all_reduce(s) of {[sum(c) for c in calls]} "
                    "elements; "
                    f"expected one, of all {total} elements at once (a flat buffer)."
                )
            others = {k: v for k, v in summary["collectives"].items() if k != "all_reduce"}
            if others:
                fail(f"{what}: rank {rank} also issued {others}; one all_reduce does it.")
            for i, (g, a) in enumerate(zip(grads, average, strict=True)):
                if _type(g) is not torch.Tensor or g.shape != a.shape or g.dtype != dtype:
                    fail(f"{what}: tensor {i} on rank {rank} is now {g!r:.80}; average it in place.")
                if not allclose(g.double(), a, rtol=1e-3, atol=1e-3):
                    hint = ""
                    if tensors_equal(g, inputs[rank][i]):
                        hint = (
                            " It still holds this rank's own values: copy the averaged buffer back into it."
                        )
                    elif allclose(g.double(), a * world_size, rtol=1e-3, atol=1e-3):
                        hint = " It holds the sum over the ranks: divide by the world size."
                    fail(f"{what}: tensor {i} on rank {rank} is not the average over the ranks.{hint}")
