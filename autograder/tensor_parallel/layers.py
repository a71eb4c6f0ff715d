"""Notebook 05's checks of tensor-parallel layers: the lecture's all_gather MLP, and Megatron's
column- and row-parallel layers and the MLP made of the two."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from ..checks import counted, fail, fresh_seed, private_generator, run_ranks
from ..comm import CommLog
from .shards import (
    DIM,
    HIDDEN,
    _carried,
    _column_shard,
    _counts,
    _expect,
    _nan_linear,
    _row_shard,
    _rows,
    _shared,
    _type,
)

# -- exercise: the lecture's all_gather MLP ----------------------------------------------------


def _kept(module: Any, name: str) -> Any:
    """``module.name``, detached, or what it is if it is not a tensor (the checks then say so)."""
    value = getattr(module, name, None)
    return value.detach().clone() if isinstance(value, torch.Tensor) else value


def _allgather_on_rank(
    rank: int, world_size: int, forward: Callable, seed: int, num_layers: int, batch: int
) -> tuple:
    mine = private_generator()
    shards = [torch.randn(DIM, DIM // world_size, generator=mine) / math.sqrt(DIM) for _ in range(num_layers)]
    x = torch.randn(batch, DIM, generator=_shared(seed, 1))
    with CommLog() as log:
        out = forward(x, [shard.clone() for shard in shards])
    return out, log.summary(), shards


def check_allgather_forward(
    forward: Callable, world_sizes: Sequence[int] = (2,), num_layers: int = 3, batch: int = 5
) -> None:
    """Check ``forward(x, local_weights)``, the lecture's tensor-parallel MLP: each rank holds a
    column slice of every layer's weight; every rank must end with the unsharded MLP's output,
    each layer's all_gather carrying this rank's features of the activation."""
    __tracebackhide__ = True
    for world_size in world_sizes:
        seed = fresh_seed()
        layers = counted(num_layers, "layer")
        what = f"the all_gather MLP on {counted(world_size, 'rank')}, {layers} of {DIM} x {DIM}"
        per_rank = run_ranks(
            _allgather_on_rank, world_size, forward, seed, num_layers, batch, what="the forward"
        )
        expected = torch.randn(batch, DIM, generator=_shared(seed, 1))
        for layer in range(num_layers):
            weight = torch.cat([shards[layer] for _, _, shards in per_rank], dim=1)
            expected = F.gelu(expected @ weight)
        for rank, (out, summary, _) in enumerate(per_rank):
            if (
                _type(out) is torch.Tensor
                and world_size > 1
                and out.shape == (batch * world_size, DIM // world_size)
            ):
                fail(
                    f"{what}: rank {rank}'s output has shape {tuple(out.shape)}: the gathered slices were "
                    "stacked along the rows (the batch). Each rank's slice is some of the features: join "
                    "them along dim 1."
                )
            _expect(f"{what}: rank {rank}'s output", out, expected)
            if world_size > 1:
                _counts(f"{what}: rank {rank}", summary, {"all_gather": num_layers})
                _carried(
                    f"{what}: rank {rank}",
                    summary,
                    "all_gather",
                    batch * DIM // world_size,
                    "its features of one layer's activation",
                )


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
    return _kept(layer, "weight"), _kept(layer, "bias"), out, log.summary(), weight, bias, x


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
        for rank, (kept_weight, kept_bias, out, summary, weight, bias, x) in enumerate(per_rank):
            _expect(f"{what}: rank {rank}'s .weight (its rows of the full weight)", kept_weight, weight)
            _expect(f"{what}: rank {rank}'s .bias (its slice of the full bias)", kept_bias, bias)
            _expect(
                f"{what}: rank {rank}'s output (its slice of the output features)",
                out,
                F.linear(x, weight, bias),
            )
            _counts(f"{what}: rank {rank}", summary, {})


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
    return _kept(layer, "weight"), _kept(layer, "bias"), out, log.summary(), weight, hidden


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
        full = sum(hidden @ weight.T for *_, weight, hidden in per_rank) + bias
        hints = {"add the bias on every rank before the all_reduce": full + (world_size - 1) * bias}
        for rank, (kept_weight, kept_bias, out, summary, weight, hidden) in enumerate(per_rank):
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
            _expect(f"{where}: output", got["y"], y)
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
