"""Notebook 05's checks of tensor-parallel layers: the lecture's all_gather MLP, and Megatron's
column- and row-parallel layers and the MLP made of the two."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from ..checks import counted, expect_floats, fail, fresh_seed, private_generator, run_ranks
from ..comm import CommLog
from .shards import (
    DIM,
    HIDDEN,
    _carried,
    _column_shard,
    _counts,
    _expect,
    _expect_own_storage,
    _nan_linear,
    _row_shard,
    _rows,
    _shared,
    _storage,
    _type,
)

# -- exercise: the lecture's all_gather MLP, forward and backward -------------------------------


def _kept(module: Any, name: str) -> Any:
    """``module.name``, detached, or what it is if it is not a tensor (the checks then say so)."""
    value = getattr(module, name, None)
    return value.detach().clone() if isinstance(value, torch.Tensor) else value


def _allgather_on_rank(
    rank: int, world_size: int, mlp: Callable, seed: int, num_layers: int, batch: int
) -> dict:
    mine = private_generator()
    shards = [torch.randn(DIM, DIM // world_size, generator=mine) / math.sqrt(DIM) for _ in range(num_layers)]
    weights = [shard.clone().requires_grad_(True) for shard in shards]
    x = torch.randn(batch, DIM, generator=_shared(seed, 1))  # data: it needs no gradient
    upstream = torch.randn(batch, DIM, generator=mine)  # this rank's own term of the loss
    with CommLog() as forward:
        out = mlp(x, weights)
    with CommLog() as backward:
        # Only an output of the right shape with a path back to the weights can be differentiated;
        # the check says what is wrong with any other.
        if _type(out) is torch.Tensor and out.shape == (batch, DIM) and out.requires_grad:
            (out * upstream).sum().backward()
    return {
        "out": out.detach() if _type(out) is torch.Tensor else out,
        "differentiable": _type(out) is torch.Tensor and out.requires_grad,
        "grads": [w.grad.clone() if isinstance(w.grad, torch.Tensor) else w.grad for w in weights],
        "forward": forward.summary(),
        "backward": backward.summary(),
        "shards": shards,
        "upstream": upstream,
    }


def _unsharded_allgather_mlp(per_rank: list[dict], seed: int, batch: int, num_layers: int) -> tuple:
    """The whole MLP from the ranks' shards: its output, each whole weight's gradient for the loss
    that is the sum of the ranks' terms, and that gradient had only this rank's term been counted."""
    weights = [
        torch.cat([got["shards"][layer] for got in per_rank], dim=1).requires_grad_(True)
        for layer in range(num_layers)
    ]
    out = torch.randn(batch, DIM, generator=_shared(seed, 1))
    for weight in weights:
        out = F.gelu(out @ weight)
    upstreams = [got["upstream"] for got in per_rank]
    whole = torch.autograd.grad(out, weights, sum(upstreams), retain_graph=True)
    alone = [torch.autograd.grad(out, weights, upstream, retain_graph=True) for upstream in upstreams]
    return out.detach(), whole, alone


def _own_columns_taken(per_rank: list[dict], rank: int, seed: int, batch: int, num_layers: int) -> list:
    """``rank``'s gradient of each of its slices had its backward of the all_gather kept its own
    columns of its own gradient (no reduce_scatter): the gradient flows through its own slice of
    each activation only, the other ranks' slices held constant."""
    columns = _rows(DIM, rank, len(per_rank))
    whole = [torch.cat([got["shards"][layer] for got in per_rank], dim=1) for layer in range(num_layers)]
    mine = [weight[:, columns].clone().requires_grad_(True) for weight in whole]
    out = torch.randn(batch, DIM, generator=_shared(seed, 1))
    for weight, own in zip(whole, mine, strict=True):
        others = F.gelu(out.detach() @ weight)
        out = torch.cat([others[:, : columns.start], F.gelu(out @ own), others[:, columns.stop :]], dim=1)
    return list(torch.autograd.grad(out, mine, per_rank[rank]["upstream"]))


def check_allgather_mlp(
    mlp: Callable, world_sizes: Sequence[int] = (2,), num_layers: int = 3, batch: int = 5
) -> None:
    """Check ``mlp(x, local_weights)``, the lecture's tensor-parallel MLP with its backward: each
    rank holds a column slice of every layer's weight and ends with the whole output; each rank
    then backpropagates its own term of the loss (the loss is their sum), and each slice's
    gradient must be its part of the whole weight's. One all_gather of this rank's features per
    layer forward, one reduce_scatter of the whole activation's gradient per layer backward."""
    __tracebackhide__ = True
    for world_size in world_sizes:
        seed = fresh_seed()
        layers = counted(num_layers, "layer")
        what = f"the all_gather MLP on {counted(world_size, 'rank')}, {layers} of {DIM} x {DIM}"
        share = DIM // world_size
        # Slices stacked along the batch reach the next layer as (batch * world_size, share).
        stacked = {
            f"mat1 and mat2 shapes cannot be multiplied ({batch * world_size}x{share} and ": (
                f"a layer's output reached the next layer with shape ({batch * world_size}, {share}): the "
                "gathered slices were stacked along the rows (the batch). Each rank's slice is some of the "
                "features."
            )
        }
        per_rank = run_ranks(
            _allgather_on_rank,
            world_size,
            mlp,
            seed,
            num_layers,
            batch,
            what="the MLP",
            diagnoses=stacked if world_size > 1 else None,
        )
        expected, whole, alone = _unsharded_allgather_mlp(per_rank, seed, batch, num_layers)
        for rank, got in enumerate(per_rank):
            sliced = _own_columns_taken(per_rank, rank, seed, batch, num_layers) if world_size > 1 else []
            out = got["out"]
            if _type(out) is torch.Tensor and world_size > 1 and out.shape == (batch * world_size, share):
                fail(
                    f"{what}: rank {rank}'s output has shape {tuple(out.shape)}: the gathered slices were "
                    "stacked along the rows (the batch). Each rank's slice is some of the features."
                )
            _expect(f"{what}: rank {rank}'s output", out, expected)
            if world_size > 1:
                where = f"{what}: rank {rank}"
                _counts(f"{where}, the forward pass", got["forward"], {"all_gather": num_layers})
                _carried(where, got["forward"], "all_gather", batch * share, "its features of one activation")
            if not got["differentiable"]:
                fail(
                    f"{what}: rank {rank}'s output does not require a gradient, though the weights do: "
                    "nothing in the graph leads back to them. A collective called directly has no autograd "
                    "formula; an autograd Function gives it one."
                )
            columns = _rows(DIM, rank, world_size)
            for layer, grad in enumerate(got["grads"]):
                hints = {}
                if world_size > 1:
                    hints["send back only this rank's own gradient, not the sum over the ranks"] = alone[
                        rank
                    ][layer][:, columns]
                    hints[
                        "take this rank's columns of its own gradient in the backward pass, as if that "
                        "gradient were already summed over the ranks"
                    ] = sliced[layer]
                _expect(
                    f"{what}: rank {rank}'s gradient of layer {layer}'s slice",
                    grad,
                    whole[layer][:, columns],
                    hints,
                )
            if world_size > 1:
                _backward_collectives(f"{what}: rank {rank}", got["backward"], num_layers, batch)


def _backward_collectives(where: str, summary: dict, num_layers: int, batch: int) -> None:
    """The backward pass: one reduce_scatter per layer of the whole activation's gradient."""
    __tracebackhide__ = True
    reduced = summary["collectives"].get("all_reduce", 0)
    if reduced:
        fail(
            f"{where}: the backward pass issued {counted(reduced, 'all_reduce')}. Each rank needs the summed "
            "gradient of its own features only: an all_reduce delivers every feature's to every rank, "
            "twice the bytes of the collective that delivers each rank its share."
        )
    _counts(f"{where}, the backward pass", summary, {"reduce_scatter": num_layers})
    _carried(where, summary, "reduce_scatter", batch * DIM, "its part of the whole activation's gradient")


# -- exercise: Megatron's column- and row-parallel layers, and their MLP -------------------------


def _column_on_rank(rank: int, world_size: int, cls: Callable, seed: int, batch: int) -> tuple:
    weight, bias = _column_shard(world_size, private_generator())
    full = _nan_linear(DIM, HIDDEN)
    rows = _rows(HIDDEN, rank, world_size)
    with torch.no_grad():
        full.weight[rows] = weight
        full.bias[rows] = bias
    layer = cls(full, rank, world_size)
    x = torch.randn(batch, DIM, generator=_shared(seed, 2))
    with torch.no_grad(), CommLog() as log:
        out = layer(x)
    kept = _kept(layer, "weight"), _kept(layer, "bias")
    return *kept, out, log.summary(), weight, bias, x, _storage(layer)


def check_column_parallel(cls: Callable, world_sizes: Sequence[int] = (2,), batch: int = 5) -> None:
    """Check ``cls(full_linear, rank, world_size)``: it keeps this rank's rows of the weight (its
    share of the output features) and of the bias, and returns this rank's slice of the output,
    with no communication."""
    __tracebackhide__ = True
    for world_size in world_sizes:
        what = f"ColumnParallelLinear({DIM} -> {HIDDEN}) on {counted(world_size, 'rank')}"
        per_rank = run_ranks(
            _column_on_rank, world_size, cls, fresh_seed(), batch, what="ColumnParallelLinear"
        )
        for rank, (kept_weight, kept_bias, out, summary, weight, bias, x, stored) in enumerate(per_rank):
            _expect(f"{what}: rank {rank}'s .weight (its rows of the full weight)", kept_weight, weight)
            _expect(f"{what}: rank {rank}'s .bias (its slice of the full bias)", kept_bias, bias)
            _expect(
                f"{what}: rank {rank}'s output (its slice of the output features)",
                out,
                F.linear(x, weight, bias),
            )
            _counts(f"{what}: rank {rank}", summary, {})
            shard_bytes = (weight.numel() + bias.numel()) * weight.element_size()
            _expect_own_storage(f"{what}: rank {rank}", stored, shard_bytes)


def _row_on_rank(rank: int, world_size: int, cls: Callable, seed: int, batch: int) -> tuple:
    mine = private_generator()
    weight = _row_shard(world_size, mine)
    bias = torch.randn(DIM, generator=_shared(seed, 3))
    full = _nan_linear(HIDDEN, DIM)
    with torch.no_grad():
        full.weight[:, _rows(HIDDEN, rank, world_size)] = weight
        full.bias.copy_(bias)
    layer = cls(full, rank, world_size)
    hidden = torch.randn(batch, HIDDEN // world_size, generator=mine)
    with torch.no_grad(), CommLog() as log:
        out = layer(hidden.clone())
    kept = _kept(layer, "weight"), _kept(layer, "bias")
    return *kept, out, log.summary(), weight, hidden, _storage(layer)


def check_row_parallel(cls: Callable, world_sizes: Sequence[int] = (2,), batch: int = 5) -> None:
    """Check ``cls(full_linear, rank, world_size)``: it keeps this rank's columns of the weight (its
    share of the input features) and the whole bias, takes this rank's slice of the input, and
    returns the whole output on every rank, with one all_reduce of the output."""
    __tracebackhide__ = True
    for world_size in world_sizes:
        seed = fresh_seed()
        what = f"RowParallelLinear({HIDDEN} -> {DIM}) on {counted(world_size, 'rank')}"
        per_rank = run_ranks(_row_on_rank, world_size, cls, seed, batch, what="RowParallelLinear")
        bias = torch.randn(DIM, generator=_shared(seed, 3))
        full = sum(hidden @ weight.T for *_, weight, hidden, _ in per_rank) + bias
        hints = {"add the bias on every rank before the all_reduce": full + (world_size - 1) * bias}
        for rank, (kept_weight, kept_bias, out, summary, weight, hidden, stored) in enumerate(per_rank):
            _expect(f"{what}: rank {rank}'s .weight (its columns of the full weight)", kept_weight, weight)
            _expect(f"{what}: rank {rank}'s .bias (the whole bias)", kept_bias, bias)
            alone = {
                "return this rank's partial sum with the bias, without the others'": hidden @ weight.T + bias
            }
            _expect(
                f"{what}: rank {rank}'s output", out, full, {**hints, **alone} if world_size > 1 else None
            )
            if world_size > 1:
                _counts(f"{what}: rank {rank}", summary, {"all_reduce": 1})
                _carried(
                    f"{what}: rank {rank}",
                    summary,
                    "all_reduce",
                    batch * DIM,
                    "its partial sum of the output",
                )
            _expect_own_storage(
                f"{what}: rank {rank}", stored, (weight.numel() + DIM) * weight.element_size()
            )


_MLP_PARAMETERS = ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")


def _gradient(module: Any, dotted: str) -> Any:
    value = module
    for name in dotted.split("."):
        value = getattr(value, name, None)
    grad = getattr(value, "grad", None)
    return grad.clone() if isinstance(grad, torch.Tensor) else grad


def _mlp_on_rank(rank: int, world_size: int, cls: Callable, seed: int, batch: int) -> dict:
    mine = private_generator()
    w1, b1 = _column_shard(world_size, mine)
    w2 = _row_shard(world_size, mine)
    b2 = torch.randn(DIM, generator=_shared(seed, 3))
    fc1, fc2 = _nan_linear(DIM, HIDDEN), _nan_linear(HIDDEN, DIM)
    share = _rows(HIDDEN, rank, world_size)
    with torch.no_grad():
        fc1.weight[share], fc1.bias[share] = w1, b1
        fc2.weight[:, share] = w2
        fc2.bias.copy_(b2)
    mlp = cls(fc1, fc2, rank, world_size)
    x = torch.randn(batch, DIM, generator=_shared(seed, 2)).requires_grad_(True)
    upstream = torch.randn(batch, DIM, generator=_shared(seed, 4))
    with CommLog() as forward:
        y = mlp(x)
    with CommLog() as backward:
        (y * upstream).sum().backward()
    return {
        "y": y.detach() if isinstance(y, torch.Tensor) else y,
        "x.grad": x.grad,
        "grads": {name: _gradient(mlp, name) for name in _MLP_PARAMETERS},
        "forward": forward.summary(),
        "backward": backward.summary(),
        "shards": (w1, b1, w2),
        "stored": _storage(mlp),
    }


def _unsharded_mlp(per_rank: list[dict], seed: int, batch: int) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """The whole MLP assembled from the ranks' shards: its output, x's gradient, its gradients."""
    w1 = torch.cat([got["shards"][0] for got in per_rank]).requires_grad_(True)
    b1 = torch.cat([got["shards"][1] for got in per_rank]).requires_grad_(True)
    w2 = torch.cat([got["shards"][2] for got in per_rank], dim=1).requires_grad_(True)
    b2 = torch.randn(DIM, generator=_shared(seed, 3)).requires_grad_(True)
    x = torch.randn(batch, DIM, generator=_shared(seed, 2)).requires_grad_(True)
    y = F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)
    (y * torch.randn(batch, DIM, generator=_shared(seed, 4))).sum().backward()
    grads = {"fc1.weight": w1.grad, "fc1.bias": b1.grad, "fc2.weight": w2.grad, "fc2.bias": b2.grad}
    return y.detach(), x.grad, grads


def _mlp_output_hints(per_rank: list[dict], rank: int, seed: int, batch: int, y: torch.Tensor) -> dict | None:
    """What fc2's two usual mistakes make of the MLP's output on ``rank``: its bias added on every
    rank before the all_reduce, or no all_reduce at all (this rank's partial sum, with the bias)."""
    world_size = len(per_rank)
    if world_size == 1:
        return None
    w1, b1, w2 = per_rank[rank]["shards"]
    b2 = torch.randn(DIM, generator=_shared(seed, 3))
    x = torch.randn(batch, DIM, generator=_shared(seed, 2))
    return {
        "add the bias on every rank before the all_reduce": y + (world_size - 1) * b2,
        "return this rank's partial sum with the bias, without the others'": F.linear(
            F.gelu(F.linear(x, w1, b1)), w2, b2
        ),
    }


def check_tensor_parallel_mlp(cls: Callable, world_sizes: Sequence[int] = (2,), batch: int = 5) -> None:
    """Check ``cls(fc1, fc2, rank, world_size)``, an MLP ``fc2(gelu(fc1(x)))`` with ``.fc1``
    column-parallel and ``.fc2`` row-parallel: its output, the input's gradient and each shard's
    gradient equal the unsharded MLP's (each shard's its slice; fc2's bias whole on every rank),
    with exactly one all_reduce of the output in the forward pass and one of x's gradient in the
    backward."""
    __tracebackhide__ = True
    for world_size in world_sizes:
        seed = fresh_seed()
        what = f"the tensor-parallel MLP on {counted(world_size, 'rank')}"
        per_rank = run_ranks(_mlp_on_rank, world_size, cls, seed, batch, what="TensorParallelMLP")
        y, x_grad, grads = _unsharded_mlp(per_rank, seed, batch)
        for rank, got in enumerate(per_rank):
            rows = _rows(HIDDEN, rank, world_size)
            where = f"{what}, rank {rank}"
            _expect(f"{where}: output", got["y"], y, _mlp_output_hints(per_rank, rank, seed, batch, y))
            if world_size > 1:
                _counts(f"{where}: the forward pass", got["forward"], {"all_reduce": 1})
                backward = got["backward"]["collectives"].get("all_reduce", 0)
                if backward == 0:
                    fail(
                        f"{where}: the backward pass issued no all_reduce, so x's gradient on each rank is "
                        "only the part that flows through that rank's own hidden features. Which of the two "
                        "operators must complete it, and in which direction?"
                    )
                if backward > 1:
                    fail(
                        f"{where}: the backward pass issued {backward} all_reduces; expected one. The "
                        "output's gradient arrives whole on every rank: which of your operators adds it up "
                        "again?"
                    )
                _counts(f"{where}: the backward pass", got["backward"], {"all_reduce": 1})
                for phase in ("forward", "backward"):
                    _carried(
                        f"{where}: the {phase} pass",
                        got[phase],
                        "all_reduce",
                        batch * DIM,
                        "a tensor the size of the layer's output" if phase == "forward" else "x's gradient",
                    )
            _expect(f"{where}: the input's gradient", got["x.grad"], x_grad)
            expected = {
                "fc1.weight": grads["fc1.weight"][rows],
                "fc1.bias": grads["fc1.bias"][rows],
                "fc2.weight": grads["fc2.weight"][:, rows],
                "fc2.bias": grads["fc2.bias"],
            }
            for name, grad in expected.items():
                hints = {"all_reduce the output's gradient on its way back too": grad * world_size}
                part = "the whole gradient" if name == "fc2.bias" else "its slice of the full gradient"
                _expect(f"{where}: {name}'s gradient ({part})", got["grads"][name], grad, hints)
            shard_bytes = sum(t.numel() * t.element_size() for t in got["shards"]) + DIM * 4
            _expect_own_storage(where, got["stored"], shard_bytes)


# -- the operators f and g, on their own ---------------------------------------------------------


def _operators_on_rank(rank: int, world_size: int, f: Any, g: Any, batch: int) -> dict:
    mine = private_generator()
    got = {}
    for name, operator in (("f", f), ("g", g)):
        x = torch.randn(batch, DIM, generator=mine, requires_grad=True)
        upstream = torch.randn(batch, DIM, generator=mine)
        with CommLog() as forward:
            # An autograd Function, as asked; a plain function that does the same is taken too.
            y = operator.apply(x) if hasattr(operator, "apply") else operator(x)
        with CommLog() as backward:
            if _type(y) is torch.Tensor and y.shape == x.shape and y.requires_grad:
                (y * upstream).sum().backward()
        got[name] = {
            "x": x.detach(),
            "upstream": upstream,
            "y": y.detach() if _type(y) is torch.Tensor else y,
            "x.grad": x.grad,
            "forward": forward.summary(),
            "backward": backward.summary(),
        }
    return got


def check_parallel_operators(f: Any, g: Any, world_sizes: Sequence[int] = (2,), batch: int = 3) -> None:
    """Check the autograd functions ``f`` (``CopyToParallel``) and ``g`` (``ReduceFromParallel``)
    on their own, each rank with its own input and its own gradient of the output: ``f`` the
    identity forward and an all_reduce of the gradient backward; ``g`` an all_reduce forward and
    the identity backward; no other collective either way. (The MLP's check alone cannot tell a
    ``g`` it never calls.)"""
    __tracebackhide__ = True
    for world_size in world_sizes:
        per_rank = run_ranks(
            _operators_on_rank, world_size, f, g, batch, what="CopyToParallel and ReduceFromParallel"
        )
        for name, cls in (("f", f), ("g", g)):
            summed_x = sum(got[name]["x"] for got in per_rank)
            summed_up = sum(got[name]["upstream"] for got in per_rank)
            for rank, got in enumerate(per_rank):
                mine = got[name]
                where = (
                    f"{getattr(cls, '__name__', name)} ({name}) on {counted(world_size, 'rank')}, rank {rank}"
                )
                reference = "what the operator gives, from every rank's tensors"
                several = world_size > 1
                if name == "f":
                    expect_floats(
                        f"{where}: the forward pass (the identity)",
                        mine["y"],
                        mine["x"],
                        reference,
                        mistakes={"all_reduce the input": summed_x} if several else None,
                    )
                    expect_floats(
                        f"{where}: x's gradient (the gradients of every rank's output, summed)",
                        mine["x.grad"],
                        summed_up,
                        reference,
                        mistakes={"leave the gradient as it arrived": mine["upstream"]} if several else None,
                    )
                else:
                    expect_floats(
                        f"{where}: the forward pass (the ranks' inputs, summed)",
                        mine["y"],
                        summed_x,
                        reference,
                        mistakes={"leave the input as it is": mine["x"]} if several else None,
                    )
                    trap = (
                        "all_reduce the gradient too: the adjoint of an all_reduce is the identity, as "
                        "every rank's output is already the whole sum"
                    )
                    expect_floats(
                        f"{where}: x's gradient (the identity)",
                        mine["x.grad"],
                        mine["upstream"],
                        reference,
                        mistakes={trap: summed_up} if several else None,
                    )
                if several:
                    calls = {"all_reduce": 1}
                    _counts(f"{where}: the forward pass", mine["forward"], {} if name == "f" else calls)
                    _counts(f"{where}: the backward pass", mine["backward"], calls if name == "f" else {})
