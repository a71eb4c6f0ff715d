"""Notebook 04's checks of data-parallel training by hand: each rank loading its own share of the
data and starting from rank 0's parameters, and the loss of an uneven shard (an empty one
included)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ..checks import counted, fail, fresh_seed, run_ranks
from .model import _close, _compare, _params_like, _type, make_batch, make_mlp, mse, train_alone

# -- exercise: data parallelism by hand -------------------------------------------------------------


class RowsRead(torch.utils.data.Dataset):
    """The batch as a dataset: item ``i`` is row ``i``'s (inputs, targets). Notes in ``log`` the
    rows read (``("read", i)``), so that a check can tell whether a rank loaded only its own."""

    def __init__(self, data: torch.Tensor, targets: torch.Tensor, log: list) -> None:
        self._rows, self._log = (data, targets), log

    def __len__(self) -> int:
        return len(self._rows[0])

    def __getitem__(self, index: Any) -> tuple[torch.Tensor, torch.Tensor]:
        rows = torch.arange(len(self))[index]  # an int, a slice, or a list or tensor of them
        self._log += [("read", i) for i in rows.reshape(-1).tolist()]
        return self._rows[0][rows], self._rows[1][rows]


def _train_on_rank(
    rank: int, world_size: int, train: Callable, batch: int, steps: int, lr: float, seed: int
) -> tuple:
    log: list[tuple[str, int]] = []  # ("read", row) and ("forward", rows), in order
    made: list[int] = []

    def make_model() -> nn.Module:
        made.append(1)
        model = make_mlp(seed=seed + 1 + rank)  # each rank's own, as on separate GPUs
        model.register_forward_pre_hook(lambda module, inputs: log.append(("forward", inputs[0].shape[0])))
        return model

    dataset = RowsRead(*make_batch(batch, seed=seed), log)
    params = train(rank, world_size, make_model, dataset, steps, lr)
    return params, log, len(made)


def _reads_by_step(log: list[tuple[str, int]]) -> tuple[list[int], list[set[int]]]:
    """The rows each forward was fed, and the rows read before it (since the forward before)."""
    fed, reads, current = [], [], set()
    for kind, value in log:
        if kind == "read":
            current.add(value)
        else:
            fed.append(value)
            reads.append(current)
            current = set()
    return fed, reads


def check_data_parallel(
    train: Callable, world_sizes: Sequence[int] = (2,), batch: int = 8, steps: int = 3, lr: float = 0.1
) -> None:
    """Check ``train(rank, world_size, make_model, dataset, steps, lr)``: every rank ends with the
    parameters one process reaches training the whole batch with SGD, from rank 0's initial
    parameters; at each step each rank computed on its own share of the rows, having read no
    other (a rank may read its share once and keep it, or read a new share at each step), and
    the shares, of equal size, cover the batch."""
    __tracebackhide__ = True
    name = getattr(train, "__name__", "train")
    seed = fresh_seed()
    data, targets = make_batch(batch, seed=seed)
    reference = train_alone(make_mlp(seed=seed + 1), data, targets, steps, lr)
    for world_size in world_sizes:
        what = f"{name} on {counted(world_size, 'rank')}, a dataset of {batch} rows, {steps} steps"
        per_rank = run_ranks(_train_on_rank, world_size, train, batch, steps, lr, seed, what=name)
        share = batch // world_size
        by_step = [_reads_by_step(log) for _, log, _ in per_rank]
        for rank, (params, _, made) in enumerate(per_rank):
            if made != 1:
                fail(
                    f"{what}: rank {rank} called make_model() {made} times; call it once, for this rank's "
                    "model."
                )
            fed, reads = by_step[rank]
            if not fed or any(n != share for n in fed):
                fail(
                    f"{what}: rank {rank}'s model was fed batches of {sorted(set(fed))} rows; its share of "
                    f"the batch has {share}. Each rank computes on all its own rows at once, and on no "
                    "other rank's."
                )
            for step, read in enumerate(reads):
                if len(read) > share or (step == 0 and len(read) != share):
                    whole = " the whole batch, as if it trained alone:" if len(read) == batch else ""
                    fail(
                        f"{what}: before its forward at step {step + 1}, rank {rank} read {len(read)} of the "
                        f"dataset's rows ({_rows(sorted(read))});{whole} its share is {share}. Each rank "
                        "loads only its own rows (a DistributedSampler, or indices of its own)."
                    )
            _params_like(f"{what}: rank {rank}", params, reference)
        for step in range(min(len(reads) for _, reads in by_step)):
            seen: set[int] = set()
            for rank, (_, reads) in enumerate(by_step):
                if reads[step] & seen:
                    fail(
                        f"{what}: at step {step + 1}, rank {rank} read {_rows(sorted(reads[step] & seen))}, "
                        "which a rank before it read too. The ranks' shares must not overlap: together "
                        "they are the batch, each row once."
                    )
                seen |= reads[step]
        for rank, (params, *_) in enumerate(per_rank[1:], start=1):
            if not all(_close(p, q) for p, q in zip(params, per_rank[0][0], strict=True)):
                fail(
                    f"{what}: rank {rank}'s parameters differ from rank 0's. Every rank must start from "
                    "rank 0's parameters (each made its own, from its own seed) and apply the same averaged "
                    "gradients."
                )
        summed = train_alone(make_mlp(seed=seed + 1), data, targets, steps, lr * world_size)
        mistakes = {"sum the gradients over the ranks without dividing by the world size": summed}
        _compare(f"{what}: rank 0", per_rank[0][0], reference, mistakes if world_size > 1 else {})


def _rows(rows: list[int]) -> str:
    return f"rows {rows}" if len(rows) <= 12 else f"rows {rows[:12]}..."


# -- exercise: the loss of an uneven shard ---------------------------------------------------------


def _uneven_on_rank(
    rank: int, world_size: int, shard_loss: Callable, batch: int, steps: int, lr: float, seed: int
) -> tuple[list, list[float], list[int]]:
    """This rank's parameters after training, its loss at each step, and the parameters its loss
    gave no gradient (zeros stand in for them, so that every rank's all_reduces still match)."""
    model = make_mlp(seed=seed)
    data, targets = make_batch(batch, seed=seed + 1)
    x, y = data.tensor_split(world_size)[rank], targets.tensor_split(world_size)[rank]
    losses: list[float] = []
    missing: set[int] = set()
    for _ in range(steps):
        model.zero_grad()
        loss = shard_loss(model(x), y, batch)
        if _type(loss) is not torch.Tensor or loss.dim() != 0 or not loss.requires_grad:
            raise TypeError(
                f"shard_loss returned {loss!r:.80}; it must return a 0-dimensional tensor with a graph"
            )
        losses.append(float(loss.detach()))
        loss.backward()
        with torch.no_grad():
            for i, p in enumerate(model.parameters()):
                if p.grad is None:
                    missing.add(i)
                    p.grad = torch.zeros_like(p)
                dist.all_reduce(p.grad)  # summed, as the exercise says
                p -= lr * p.grad
    return [p.detach().clone() for p in model.parameters()], losses, sorted(missing)


def _losses_alone(seed: int, batch: int, steps: int, lr: float) -> list[float]:
    """The whole batch's loss at each step of one process's training: what the ranks' add up to."""
    model = make_mlp(seed=seed)
    data, targets = make_batch(batch, seed=seed + 1)
    losses = []
    for _ in range(steps):
        model.zero_grad()
        loss = mse(model(data), targets)
        losses.append(loss.item())
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= lr * p.grad
    return losses


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
    unevenly the batch divides among the ranks, a rank with no rows included; and each rank's
    loss must be its share of the whole batch's, so that the ranks' losses add up to it (a rank
    with no rows: 0, not NaN, still computed from its outputs so that backward gives every
    parameter a gradient)."""
    __tracebackhide__ = True
    seed = fresh_seed()
    data, targets = make_batch(batch, seed=seed + 1)
    reference = train_alone(make_mlp(seed=seed), data, targets, steps, lr)
    whole_losses = _losses_alone(seed, batch, steps, lr)
    for world_size in world_sizes:
        sizes = [len(s) for s in torch.arange(batch).tensor_split(world_size)]
        what = (
            f"training with shard_loss on {counted(world_size, 'rank')}, a batch of {batch} split as {sizes}"
        )
        per_rank = run_ranks(
            _uneven_on_rank, world_size, shard_loss, batch, steps, lr, seed, what="shard_loss"
        )
        _expect_gradients(what, sizes, [missing for _, _, missing in per_rank])
        params = per_rank[0][0]
        _params_like(what, params, reference)
        mistakes = {
            "take the mean over this rank's shard (every shard then weighs the same, whatever its size)": (
                _emulate_shards(lambda o, t, n: mse(o, t), world_size, batch, steps, lr, seed)
            ),
            "divide by the number of rows but not by the number of outputs in each": (
                _emulate_shards(lambda o, t, n: ((o - t) ** 2).sum() / n, world_size, batch, steps, lr, seed)
            ),
        }
        _compare(what, params, reference, mistakes)
        _expect_shares(what, sizes, [losses for _, losses, _ in per_rank], whole_losses)


def _expect_gradients(what: str, sizes: list[int], missing: list[list[int]]) -> None:
    __tracebackhide__ = True
    for rank, absent in enumerate(missing):
        if absent:
            fail(
                f"{what}: on rank {rank}, with {counted(sizes[rank], 'row')}, backward gave parameters "
                f"{absent} no gradient: the loss shard_loss returned does not depend on them. A rank's "
                "loss must come from its outputs, even with no rows (a sum over none of them is 0), so "
                "that backward gives every parameter a gradient, of zeros if need be: every rank takes "
                "part in each parameter's all_reduce."
            )


def _expect_shares(what: str, sizes: list[int], losses: list[list[float]], whole: list[float]) -> None:
    """Each rank's loss is a finite number, and the ranks' losses add up to the whole batch's."""
    __tracebackhide__ = True
    for step, expected in enumerate(whole):
        for rank, rank_losses in enumerate(losses):
            if not math.isfinite(rank_losses[step]):
                empty = (
                    " The mean of no elements is 0/0, NaN, and NaN times 0 is still NaN: with no rows, a "
                    "rank's share of the whole batch's loss is 0. Compute it from a sum, which is 0 over no "
                    "elements."
                    if sizes[rank] == 0
                    else ""
                )
                fail(
                    f"{what}, step {step + 1}: rank {rank}, with {counted(sizes[rank], 'row')}, returned a "
                    f"loss of {rank_losses[step]}; expected its share of the whole batch's loss.{empty}"
                )
        total = sum(rank_losses[step] for rank_losses in losses)
        if not math.isclose(total, expected, rel_tol=1e-4, abs_tol=1e-6):
            fail(
                f"{what}, step {step + 1}: the ranks' losses add up to {total:.6g}; the whole batch's mse "
                f"is {expected:.6g}. Each rank's loss is its share of the whole batch's, so that the "
                "ranks' losses, like their gradients, add up to the whole batch's."
            )
