"""Check of notebook 07's exercise with torch's ``fully_shard``: every rank returns the parameters
one process reaches on the whole batch from rank 0's model, each layer its own unit."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from ..checks import counted, fail, fresh_seed, run_ranks
from ..comm import CommLog
from ..data_parallel import make_batch, make_mlp, train_alone
from ..torch_compat import OLD_GLOO
from .common import _close, _compare, _params_like, _type


def _fully_shard_on_rank(
    rank: int, world_size: int, train: Callable, batch: int, steps: int, lr: float, seed: int
) -> tuple:
    made: list[int] = []

    def make_model() -> nn.Module:
        made.append(1)
        return make_mlp(seed=seed + 1 + rank)  # each rank's own, as on separate GPUs

    data, targets = make_batch(batch, seed=seed)
    with CommLog(count_collectives=False) as log:
        params = train(rank, world_size, make_model, data, targets, steps, lr)
    summary = log.summary()
    if _type(params) is list:
        params = [p if _type(p) is torch.Tensor else None for p in params]
    largest = {}  # the most elements one collective of each kind carried, as a whole array
    for (name, _), (_, contributed) in zip(summary["calls"], summary["contributed"], strict=True):
        size = contributed * world_size if name == "all_gather" else contributed
        largest[name] = max(largest.get(name, 0), size)
    return params, largest, len(made)


def check_fully_shard(
    train: Callable, world_sizes: Sequence[int] = (2,), batch: int = 8, steps: int = 2, lr: float = 0.1
) -> None:
    """Check ``train(rank, world_size, make_model, data, targets, steps, lr)`` with torch's
    ``fully_shard``: every rank returns the full parameters one process reaches with SGD on the
    whole batch from rank 0's model, each layer its own unit of sharding."""
    __tracebackhide__ = True
    name = getattr(train, "__name__", "train")
    seed = fresh_seed() % (1 << 31)
    data, targets = make_batch(batch, seed=seed)
    reference = train_alone(make_mlp(seed=seed + 1), data, targets, steps, lr)
    layer = max(m.weight.numel() + m.bias.numel() for m in make_mlp() if isinstance(m, nn.Linear))
    for world_size in world_sizes:
        what = f"{name} on {counted(world_size, 'rank')}, a batch of {batch}, {steps} steps"
        per_rank = run_ranks(_fully_shard_on_rank, world_size, train, batch, steps, lr, seed, what=name)
        for rank, (params, largest, made) in enumerate(per_rank):
            where = f"{what}: rank {rank}"
            if made != 1:
                fail(f"{where} called make_model() {made} times; call it once, for this rank's model.")
            _params_like(where, params, reference)
            biggest = max(largest.get("all_gather", 0), largest.get("reduce_scatter", 0))
            if world_size > 1 and biggest > 2 * layer:
                fail(
                    f"{where}: one of its collectives carried {biggest} elements, more than the model's "
                    f"largest layer ({layer} parameters): its unit of sharding is larger than a layer, "
                    "and the whole unit is gathered at once. Apply fully_shard to each linear layer, then "
                    "to the whole model."
                )
            if world_size > 1 and not largest.get("reduce_scatter"):
                fail(f"{where}: no reduce_scatter was issued: is the model sharded with fully_shard?")
            mixed = {}
            if world_size > 1:
                start = _mixed_model(seed, world_size)
                unsynced = train_alone(start, data, targets, steps, lr)
                mixed[
                    "leave each rank's model as it was made: fully_shard cuts each rank's shard from its own "
                    "model, so the model is a patchwork of the ranks' (broadcast rank 0's parameters first)"
                ] = unsynced
            if world_size > 1 and OLD_GLOO:
                summed = train_alone(make_mlp(seed=seed + 1), data, targets, steps, lr * world_size)
                mixed[
                    "shard with torch's own fully_shard on this torch: before 2.13, Gloo's reduce_scatter "
                    "sums the gradients FSDP asks it to average. Use the fully_shard imported at the top"
                ] = summed
            _compare(
                where, params, reference, "one process's SGD on the whole batch from rank 0's model", mixed
            )
        if world_size > 1 and not all(
            all(_close(p, q) for p, q in zip(r[0], per_rank[0][0], strict=True)) for r in per_rank
        ):
            fail(f"{what}: the ranks returned different parameters; each should return the full parameters.")


def _mixed_model(seed: int, world_size: int) -> nn.Module:
    """The model fully_shard makes from ranks that each made their own: each parameter's rows
    split as torch.chunk splits them, rank r's chunk from rank r's model."""
    models = [make_mlp(seed=seed + 1 + r) for r in range(world_size)]
    mixed = make_mlp(seed=seed + 1)
    with torch.no_grad():
        for name, p in mixed.named_parameters():
            chunks = [
                dict(m.named_parameters())[name].chunk(world_size)[r]
                for r, m in enumerate(models)
                if r < len(p.chunk(world_size))
            ]
            p.copy_(torch.cat(chunks))
    return mixed
