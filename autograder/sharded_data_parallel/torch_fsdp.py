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
    seen: list[torch.Tensor] = []  # the rows each forward of the model was given

    def make_model() -> nn.Module:
        made.append(1)
        model = make_mlp(seed=seed + 1 + rank)  # each rank's own, as on separate GPUs
        first = next(m for m in model if isinstance(m, nn.Linear))
        first.register_forward_pre_hook(lambda _, args: seen.append(args[0].detach().clone()))
        return model

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
    return params, largest, len(made), seen


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
    linears = [m for m in make_mlp() if isinstance(m, nn.Linear)]
    uneven = [n for n in world_sizes if batch % n]
    if uneven:  # the exercise promises rows that divide: the mean of the ranks' means is the batch's
        raise ValueError(f"check_fully_shard: a batch of {batch} does not divide over {uneven[0]} ranks")
    for world_size in world_sizes:
        what = f"{name} on {counted(world_size, 'rank')}, a batch of {batch}, {steps} steps"
        per_rank = run_ranks(_fully_shard_on_rank, world_size, train, batch, steps, lr, seed, what=name)
        _expect_own_rows(what, data, [r[3] for r in per_rank], world_size)
        # The most one unit of one layer carries: each parameter's rows padded to a multiple of n.
        layer = max(sum(_padded(p, world_size) for p in m.parameters()) for m in linears)
        for rank, (params, largest, made, _) in enumerate(per_rank):
            where = f"{what}: rank {rank}"
            if made != 1:
                fail(f"{where} called make_model() {made} times; call it once, for this rank's model.")
            _params_like(where, params, reference)
            biggest = max(largest.get("all_gather", 0), largest.get("reduce_scatter", 0))
            if world_size > 1 and biggest > layer:
                fail(
                    f"{where}: one of its collectives carried {biggest} elements, more than the model's "
                    f"largest layer ({layer} with padding): its unit of sharding is larger than a layer, "
                    "and the whole unit is gathered at once. Apply fully_shard to each linear layer, then "
                    "to the whole model."
                )
            if world_size > 1 and not largest.get("reduce_scatter"):
                fail(f"{where}: no reduce_scatter was issued: is the model sharded with fully_shard?")
            mixed = {
                "make the optimizer before fully_shard: fully_shard replaces the model's parameters with "
                "sharded ones, so an optimizer made earlier holds the old ones, and nothing was trained": [
                    p.detach().clone() for p in make_mlp(seed=seed + 1).parameters()
                ]
            }
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


def _padded(p: torch.Tensor, world_size: int) -> int:
    rows = -(-p.shape[0] // world_size) * world_size
    return rows * p[0].numel()


def _expect_own_rows(what: str, data: torch.Tensor, seen: list[list[torch.Tensor]], world_size: int) -> None:
    """Each forward of each rank saw only its share of the batch, and the ranks' first forwards
    together saw all of it."""
    __tracebackhide__ = True
    batch = data.shape[0]
    share = -(-batch // world_size)
    for rank, inputs in enumerate(seen):
        if not inputs:
            fail(f"{what}: rank {rank}'s model never ran forward: train it.")
        for x in inputs:
            if _type(x) is not torch.Tensor or x.dim() != 2 or x.shape[0] > share:
                rows = x.shape[0] if isinstance(x, torch.Tensor) and x.dim() else "?"
                whole = " (the whole batch)" if rows == batch else ""
                fail(
                    f"{what}: a forward on rank {rank} was given {rows} rows{whole}; each rank trains on its "
                    f"own shard, at most {share} of the {batch} rows, data.tensor_split(world_size)[rank]. "
                    "Every rank on the whole batch does every rank's work."
                )
    first = torch.cat([inputs[0] for inputs in seen])
    found = sum(bool((first == row).all(dim=1).any()) for row in data)
    if first.shape[0] != batch or found != batch:
        fail(
            f"{what}: the ranks' first forwards were given {first.shape[0]} rows together, and {found} of "
            f"the batch's {batch}: each rank should train on its own shard, so that together they see "
            "every row once."
        )


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


# -- exercise: what fully_shard sends in one step ----------------------------------------------------


def fully_shard_traffic_reference(
    layers: Sequence[tuple[int, int]], world_size: int, reshard_after_forward: bool
) -> dict[str, tuple[int, int]]:
    """Calls and elements (whole arrays, padding included) of the all_gathers and reduce_scatters of
    one training step of linear layers ``(out_features, in_features)``, each its own ``fully_shard``
    unit (for the checks; never shown to students)."""
    if world_size == 1:
        return {"all_gather": (0, 0), "reduce_scatter": (0, 0)}
    # Each parameter's rows are padded to a multiple of n: the weight's and the bias's alike.
    units = [-(-out_f // world_size) * world_size * (in_f + 1) for out_f, in_f in layers]
    gathers = 2 if reshard_after_forward else 1  # forward, and again in backward if freed
    return {
        "all_gather": (gathers * len(units), gathers * sum(units)),
        "reduce_scatter": (len(units), sum(units)),
    }


def _traffic_mistakes(
    layers: Sequence[tuple[int, int]], world_size: int, reshard: bool
) -> dict[str, dict[str, tuple[int, int]]]:
    expected = fully_shard_traffic_reference(layers, world_size, reshard)
    gathers = 2 if reshard else 1
    unpadded = sum(o * (i + 1) for o, i in layers)
    flat = sum(-(-(o * (i + 1)) // world_size) * world_size for o, i in layers)
    one_piece = {k: (c, e // world_size) for k, (c, e) in expected.items()}
    mistakes = {
        "leave out the padding": {
            "all_gather": (gathers * len(layers), gathers * unpadded),
            "reduce_scatter": (len(layers), unpadded),
        },
        "pad each unit's flat buffer as a whole, as exercise 2 does": {
            "all_gather": (gathers * len(layers), gathers * flat),
            "reduce_scatter": (len(layers), flat),
        },
        "count one rank's piece, not the whole array": one_piece,
        "gather each unit once whatever reshard_after_forward says"
        if reshard
        else "gather each unit again in backward, though it was never freed": fully_shard_traffic_reference(
            layers, world_size, not reshard
        ),
    }
    return mistakes


def check_fully_shard_traffic(
    traffic: Callable, cases: Sequence[tuple[Sequence[tuple[int, int]], int, bool]]
) -> None:
    """Check ``traffic(layers, world_size, reshard_after_forward)`` against what torch's
    ``fully_shard`` issues (its rule, checked against torch in the course's own tests)."""
    __tracebackhide__ = True
    for layers, world_size, reshard in cases:
        what = (
            f"fully_shard_traffic({list(layers)}, world_size={world_size}, reshard_after_forward={reshard})"
        )
        expected = fully_shard_traffic_reference(layers, world_size, reshard)
        answer = traffic([tuple(layer) for layer in layers], world_size, reshard)
        if _type(answer) is not dict or set(answer) != set(expected):
            fail(
                f"{what} returned {answer!r:.120}; expected a dict with the keys 'all_gather' and "
                "'reduce_scatter'."
            )
        plain = {}
        for key, value in answer.items():
            if (
                _type(value) not in (tuple, list)
                or len(value) != 2
                or any(_type(v) is not int for v in value)
            ):
                fail(f"{what}[{key!r}] is {value!r:.80}; expected (calls, elements), two ints.")
            plain[key] = tuple(value)
        if plain == expected:
            continue
        wrong = [key for key in expected if plain[key] != expected[key]]
        message = f"{what}: {wrong[0]} is {plain[wrong[0]]} (calls, elements); not what fully_shard issues."
        if world_size == 1:
            fail(f"{message} On one rank, fully_shard has no other rank to gather from or scatter to.")
        for mistake, alternative in _traffic_mistakes(layers, world_size, reshard).items():
            if plain == alternative:
                message += f" That is what you get if you {mistake}."
                break
        fail(message)
