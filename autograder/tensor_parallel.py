"""Checks for notebook 05 (tensor parallelism).

Every check builds the full, unsharded layers here, in the checking process, and inside each
rank hands the student's code only that rank's shards (cut from weights drawn from a seed the
code never sees), so a rank cannot compute the others' part without communicating. Results are
compared with the unsharded layers' outputs and gradients, and the collectives each rank issued
are counted (with torch's CommDebugMode, through `CommLog`), forward and backward apart.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import launcher

from .checks import allclose, counted, fail, run_ranks
from .comm import CommLog

launcher.preload("autograder.tensor_parallel")

SEED = 5050
DIM, HIDDEN = 12, 48  # divisible by 1, 2, 3 and 4
_type = type


def _generator(offset: int) -> torch.Generator:
    return torch.Generator().manual_seed(SEED + offset)


def make_linear(in_features: int, out_features: int, offset: int) -> nn.Linear:
    """An nn.Linear with weights drawn from the checks' seed (its own for each ``offset``)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED + offset)
        return nn.Linear(in_features, out_features)


def _rows(n: int, rank: int, world_size: int) -> slice:
    size = n // world_size
    return slice(rank * size, (rank + 1) * size)


def _close(a: Any, b: torch.Tensor) -> bool:
    return _type(a) is torch.Tensor and a.shape == b.shape and allclose(a, b, rtol=1e-4, atol=1e-5)


def _expect(
    what: str, actual: Any, expected: torch.Tensor, hints: dict[str, torch.Tensor] | None = None
) -> None:
    __tracebackhide__ = True
    if _type(actual) is not torch.Tensor:
        fail(f"{what}: expected a tensor of shape {tuple(expected.shape)}, got {actual!r:.80}.")
    if actual.shape != expected.shape:
        fail(f"{what}: expected shape {tuple(expected.shape)}, got {tuple(actual.shape)}.")
    if _close(actual, expected):
        return
    largest = (actual - expected).abs().max()
    message = f"{what}: differs from the unsharded layer's (largest difference {largest:.3g})."
    for mistake, value in (hints or {}).items():
        if _close(actual, value):
            message += f" That is what you get if you {mistake}."
            break
    fail(message)


def _counts(what: str, summary: dict, expected: dict[str, int] | None) -> None:
    """The collectives a rank issued must be ``expected`` (None: anything, as on one rank, where
    a collective is free and may or may not be called)."""
    __tracebackhide__ = True
    if expected is None:
        return
    found = {name: n for name, n in summary["collectives"].items() if n}
    if found != expected:
        want = ", ".join(f"{n} {name}" for name, n in expected.items()) or "none"
        got = ", ".join(f"{n} {name}" for name, n in found.items()) or "none"
        fail(f"{what}: issued {got}; expected {want}.")


# -- exercise: the lecture's all_gather MLP ----------------------------------------------------


def _full_weights(num_layers: int) -> list[torch.Tensor]:
    return [torch.randn(DIM, DIM, generator=_generator(10 + i)) / math.sqrt(DIM) for i in range(num_layers)]


def _allgather_on_rank(rank: int, world_size: int, forward: Callable, num_layers: int, batch: int) -> tuple:
    shards = [w[:, _rows(DIM, rank, world_size)].clone() for w in _full_weights(num_layers)]
    x = torch.randn(batch, DIM, generator=_generator(1))
    with CommLog() as log:
        out = forward(x, shards)
    return out, log.summary()


def check_allgather_forward(
    forward: Callable, world_sizes: Sequence[int] = (2,), num_layers: int = 3, batch: int = 5
) -> None:
    """Check ``forward(x, local_weights)``, the lecture's tensor-parallel MLP: each rank holds a
    column slice of every layer's weight; every rank must end with the unsharded MLP's output."""
    __tracebackhide__ = True
    x = torch.randn(batch, DIM, generator=_generator(1))
    expected = x
    for w in _full_weights(num_layers):
        expected = F.gelu(expected @ w)
    for world_size in world_sizes:
        layers = counted(num_layers, "layer")
        what = f"the all_gather MLP on {counted(world_size, 'rank')}, {layers} of {DIM} x {DIM}"
        per_rank = run_ranks(_allgather_on_rank, world_size, forward, num_layers, batch, what="the forward")
        for rank, (out, summary) in enumerate(per_rank):
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
            _counts(f"{what}: rank {rank}", summary, {"all_gather": num_layers} if world_size > 1 else None)


# -- exercise: Megatron's column- and row-parallel layers, and their MLP -------------------------


def _mlp_layers() -> tuple[nn.Linear, nn.Linear]:
    return make_linear(DIM, HIDDEN, 20), make_linear(HIDDEN, DIM, 21)


def _input(batch: int) -> torch.Tensor:
    return torch.randn(batch, DIM, generator=_generator(2))


def _column_on_rank(rank: int, world_size: int, cls: Callable, batch: int) -> tuple:
    fc1, _ = _mlp_layers()
    layer = cls(fc1, rank, world_size)
    with torch.no_grad(), CommLog() as log:
        out = layer(_input(batch))
    return layer.weight.detach(), layer.bias.detach(), out, log.summary()


def check_column_parallel(cls: Callable, world_sizes: Sequence[int] = (2,), batch: int = 5) -> None:
    """Check ``cls(full_linear, rank, world_size)``: it keeps this rank's rows of the weight (its
    share of the output features) and of the bias, and returns this rank's slice of the output."""
    __tracebackhide__ = True
    fc1, _ = _mlp_layers()
    with torch.no_grad():
        full = fc1(_input(batch))
    for world_size in world_sizes:
        what = f"ColumnParallelLinear({DIM} -> {HIDDEN}) on {counted(world_size, 'rank')}"
        per_rank = run_ranks(_column_on_rank, world_size, cls, batch, what="ColumnParallelLinear")
        for rank, (weight, bias, out, summary) in enumerate(per_rank):
            rows = _rows(HIDDEN, rank, world_size)
            _expect(
                f"{what}: rank {rank}'s .weight (its rows of the full weight)",
                weight,
                fc1.weight[rows].detach(),
            )
            _expect(
                f"{what}: rank {rank}'s .bias (its slice of the full bias)", bias, fc1.bias[rows].detach()
            )
            _expect(f"{what}: rank {rank}'s output (its slice of the output features)", out, full[:, rows])
            _counts(f"{what}: rank {rank}", summary, {})


def _row_on_rank(rank: int, world_size: int, cls: Callable, batch: int) -> tuple:
    _, fc2 = _mlp_layers()
    layer = cls(fc2, rank, world_size)
    hidden = torch.randn(batch, HIDDEN, generator=_generator(3))[:, _rows(HIDDEN, rank, world_size)]
    with torch.no_grad(), CommLog() as log:
        out = layer(hidden)
    return layer.weight.detach(), out, log.summary()


def check_row_parallel(cls: Callable, world_sizes: Sequence[int] = (2,), batch: int = 5) -> None:
    """Check ``cls(full_linear, rank, world_size)``: it keeps this rank's columns of the weight (its
    share of the input features) and the whole bias, takes this rank's slice of the input, and
    returns the whole output on every rank, with one all_reduce."""
    __tracebackhide__ = True
    _, fc2 = _mlp_layers()
    hidden = torch.randn(batch, HIDDEN, generator=_generator(3))
    with torch.no_grad():
        full = fc2(hidden)
    for world_size in world_sizes:
        what = f"RowParallelLinear({HIDDEN} -> {DIM}) on {counted(world_size, 'rank')}"
        per_rank = run_ranks(_row_on_rank, world_size, cls, batch, what="RowParallelLinear")
        for rank, (weight, out, summary) in enumerate(per_rank):
            cols = _rows(HIDDEN, rank, world_size)
            _expect(
                f"{what}: rank {rank}'s .weight (its columns of the full weight)",
                weight,
                fc2.weight[:, cols].detach(),
            )
            hints = {
                "add the bias on every rank before the all_reduce": full
                + (world_size - 1) * fc2.bias.detach()
            }
            _expect(f"{what}: rank {rank}'s output", out, full, hints if world_size > 1 else None)
            _counts(f"{what}: rank {rank}", summary, {"all_reduce": 1} if world_size > 1 else None)


def _mlp_on_rank(rank: int, world_size: int, cls: Callable, batch: int) -> dict:
    fc1, fc2 = _mlp_layers()
    mlp = cls(fc1, fc2, rank, world_size)
    x = _input(batch).requires_grad_(True)
    upstream = torch.randn(batch, DIM, generator=_generator(4))
    with CommLog() as forward:
        y = mlp(x)
    with CommLog() as backward:
        (y * upstream).sum().backward()
    grads = {
        name: None if p.grad is None else p.grad.clone()
        for name, p in (
            ("fc1.weight", mlp.fc1.weight),
            ("fc1.bias", mlp.fc1.bias),
            ("fc2.weight", mlp.fc2.weight),
        )
    }
    grads["fc2.bias"] = None if mlp.fc2.bias.grad is None else mlp.fc2.bias.grad.clone()
    return {
        "y": y.detach(),
        "x.grad": x.grad,
        "grads": grads,
        "forward": forward.summary(),
        "backward": backward.summary(),
    }


def check_tensor_parallel_mlp(cls: Callable, world_sizes: Sequence[int] = (2,), batch: int = 5) -> None:
    """Check ``cls(fc1, fc2, rank, world_size)``, an MLP ``fc2(gelu(fc1(x)))`` with ``.fc1``
    column-parallel and ``.fc2`` row-parallel: its output, the input's gradient and each shard's
    gradient equal the unsharded MLP's (each shard's its slice), with exactly one all_reduce in
    the forward pass and one in the backward."""
    __tracebackhide__ = True
    fc1, fc2 = _mlp_layers()
    x = _input(batch).requires_grad_(True)
    y = fc2(F.gelu(fc1(x)))
    (y * torch.randn(batch, DIM, generator=_generator(4))).sum().backward()
    for world_size in world_sizes:
        what = f"the tensor-parallel MLP on {counted(world_size, 'rank')}"
        per_rank = run_ranks(_mlp_on_rank, world_size, cls, batch, what="TensorParallelMLP")
        for rank, got in enumerate(per_rank):
            rows = _rows(HIDDEN, rank, world_size)
            where = f"{what}, rank {rank}"
            _expect(f"{where}: output", got["y"], y.detach())
            if world_size > 1:
                _counts(f"{where}: the forward pass", got["forward"], {"all_reduce": 1})
                backward = got["backward"]["collectives"].get("all_reduce", 0)
                if backward == 0:
                    fail(
                        f"{where}: the backward pass issued no all_reduce. Each rank's fc1 sees all of x but "
                        "sends back only its part of x's gradient: the operator before fc1 must all_reduce "
                        "the gradient on its way back (identity forward, all_reduce backward)."
                    )
                if backward > 1:
                    fail(
                        f"{where}: the backward pass issued {backward} all_reduces; expected one. The "
                        "operator after fc2 all_reduces forward only: every rank already holds the whole "
                        "gradient of the output, so on its way back it is the identity."
                    )
                _counts(f"{where}: the backward pass", got["backward"], {"all_reduce": 1})
            _expect(f"{where}: the input's gradient", got["x.grad"], x.grad)
            expected = {
                "fc1.weight": fc1.weight.grad[rows],
                "fc1.bias": fc1.bias.grad[rows],
                "fc2.weight": fc2.weight.grad[:, rows],
                "fc2.bias": fc2.bias.grad,
            }
            for name, grad in expected.items():
                hints = {"all_reduce the output's gradient on its way back too": grad * world_size}
                _expect(
                    f"{where}: {name}'s gradient (its slice of the full gradient)",
                    got["grads"][name],
                    grad,
                    hints,
                )


# -- exercise: attention with its heads split across the ranks -----------------------------------

ATTENTION_DIM, HEADS = 24, 12  # head dimension 2; 12 heads divide among 1, 2, 3 or 4 ranks


def _attention_weights() -> list[torch.Tensor]:
    return [
        torch.randn(ATTENTION_DIM, ATTENTION_DIM, generator=_generator(30 + i)) / math.sqrt(ATTENTION_DIM)
        for i in range(4)
    ]


def reference_attention(
    x: torch.Tensor,
    wq: torch.Tensor,
    wk: torch.Tensor,
    wv: torch.Tensor,
    wo: torch.Tensor,
    heads: int,
    scaled: bool = True,
    over: int = -1,
) -> torch.Tensor:
    """Multi-head self-attention without masks or biases; weights in nn.Linear's (out, in) layout,
    head i owning rows i * head_dim ... of wq, wk and wv, and the same columns of wo. (``scaled``
    and ``over``, the softmax's dimension, are there to recognise two usual mistakes.)"""
    batch, seq, _ = x.shape

    def split(t: torch.Tensor) -> torch.Tensor:  # (batch, seq, heads * d) -> (batch, heads, seq, d)
        return t.view(batch, seq, heads, -1).transpose(1, 2)

    q, k, v = split(x @ wq.T), split(x @ wk.T), split(x @ wv.T)
    scores = q @ k.transpose(-1, -2) / (math.sqrt(q.shape[-1]) if scaled else 1.0)
    out = (scores.softmax(dim=over) @ v).transpose(1, 2).reshape(batch, seq, -1)
    return out @ wo.T


def _attention_on_rank(rank: int, world_size: int, fn: Callable, batch: int, seq: int) -> tuple:
    wq, wk, wv, wo = _attention_weights()
    rows = _rows(ATTENTION_DIM, rank, world_size)
    x = torch.randn(batch, seq, ATTENTION_DIM, generator=_generator(5))
    with torch.no_grad(), CommLog() as log:
        out = fn(
            x, wq[rows].clone(), wk[rows].clone(), wv[rows].clone(), wo[:, rows].clone(), HEADS // world_size
        )
    return out, log.summary()


def check_tensor_parallel_attention(
    fn: Callable, world_sizes: Sequence[int] = (2,), batch: int = 2, seq: int = 5
) -> None:
    """Check ``fn(x, wq, wk, wv, wo, heads)``: this rank's ``heads`` heads (its rows of wq, wk, wv,
    its columns of wo); every rank returns the whole attention output, with one all_reduce."""
    __tracebackhide__ = True
    weights = _attention_weights()
    x = torch.randn(batch, seq, ATTENTION_DIM, generator=_generator(5))
    expected = reference_attention(x, *weights, HEADS)
    hints = {
        "leave the scores undivided by the square root of the head dimension": reference_attention(
            x, *weights, HEADS, scaled=False
        ),
        "softmax over the queries rather than the keys": reference_attention(x, *weights, HEADS, over=-2),
    }
    for world_size in world_sizes:
        what = f"attention with {HEADS} heads on {counted(world_size, 'rank')}"
        per_rank = run_ranks(_attention_on_rank, world_size, fn, batch, seq, what="the attention")
        for rank, (out, summary) in enumerate(per_rank):
            _expect(f"{what}: rank {rank}'s output", out, expected, hints)
            _counts(f"{what}: rank {rank}", summary, {"all_reduce": 1} if world_size > 1 else None)


# -- exercise: sequence parallelism --------------------------------------------------------------

SEQUENCE = 12


def _sequence_on_rank(rank: int, world_size: int, fn: Callable) -> tuple:
    fc1, fc2 = _mlp_layers()
    rows = _rows(HIDDEN, rank, world_size)
    x = torch.randn(SEQUENCE, DIM, generator=_generator(6))
    tokens = _rows(SEQUENCE, rank, world_size)
    with torch.no_grad(), CommLog() as log:
        out = fn(x[tokens].clone(), fc1.weight[rows].detach().clone(), fc2.weight[:, rows].detach().clone())
    return out, log.summary()


def check_sequence_parallel(fn: Callable, world_sizes: Sequence[int] = (2,)) -> None:
    """Check ``fn(x_tokens, w1, w2)``: the MLP ``gelu(x @ w1.T) @ w2.T`` (no biases) with its input
    and output split by tokens and its weights split as Megatron's; one all_gather and one
    reduce_scatter, no all_reduce."""
    __tracebackhide__ = True
    fc1, fc2 = _mlp_layers()
    x = torch.randn(SEQUENCE, DIM, generator=_generator(6))
    with torch.no_grad():
        full = F.gelu(x @ fc1.weight.T) @ fc2.weight.T
    for world_size in world_sizes:
        what = f"the sequence-parallel MLP on {counted(world_size, 'rank')}, {SEQUENCE} tokens"
        per_rank = run_ranks(_sequence_on_rank, world_size, fn, what="the sequence-parallel MLP")
        for rank, (out, summary) in enumerate(per_rank):
            _expect(
                f"{what}: rank {rank}'s output (its tokens)", out, full[_rows(SEQUENCE, rank, world_size)]
            )
            if world_size > 1 and summary["collectives"].get("all_reduce"):
                fail(
                    f"{what}: rank {rank} issued an all_reduce. An all_reduce leaves every rank the whole "
                    "output, of which it keeps a slice; a reduce_scatter sends each rank only its tokens."
                )
            _counts(
                f"{what}: rank {rank}",
                summary,
                {"all_gather": 1, "reduce_scatter": 1} if world_size > 1 else None,
            )


# -- exercise: cross-entropy over a vocabulary split across ranks --------------------------------

VOCAB, ROWS = 24, 6


def _logits(scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    logits = torch.randn(ROWS, VOCAB, generator=_generator(7)) * 3 + scale
    targets = torch.randint(0, VOCAB, (ROWS,), generator=_generator(8))
    return logits, targets


def _cross_entropy_on_rank(rank: int, world_size: int, fn: Callable, scale: float) -> tuple:
    logits, targets = _logits(scale)
    columns = _rows(VOCAB, rank, world_size)
    with torch.no_grad(), CommLog() as log:
        loss = fn(logits[:, columns].clone(), targets, columns.start)
    return loss, log.summary()


def check_vocab_parallel_cross_entropy(
    fn: Callable, world_sizes: Sequence[int] = (2,), scales: Sequence[float] = (0.0,)
) -> None:
    """Check ``fn(logits_shard, targets, vocab_start)``: the mean cross-entropy over the rows, equal
    on every rank to ``F.cross_entropy`` of the whole logits, without gathering them."""
    __tracebackhide__ = True
    for scale in scales:
        logits, targets = _logits(scale)
        expected = F.cross_entropy(logits.double(), targets).float()
        for world_size in world_sizes:
            what = f"the cross-entropy on {counted(world_size, 'rank')}, logits around {scale:g}"
            per_rank = run_ranks(_cross_entropy_on_rank, world_size, fn, scale, what="the cross-entropy")
            for rank, (loss, summary) in enumerate(per_rank):
                if _type(loss) is torch.Tensor and loss.dim() == 0 and not torch.isfinite(loss):
                    fail(
                        f"{what}: rank {rank}'s loss is {loss.item()}. exp() of logits near {scale:g} "
                        "overflows: subtract the largest logit (over the whole vocabulary) before "
                        "exponentiating."
                    )
                _expect(f"{what}: rank {rank}'s loss", loss, expected)
                if summary["collectives"].get("all_gather") or summary["collectives"].get("gather"):
                    fail(
                        f"{what}: rank {rank} gathered the logits. The point is never to hold the whole "
                        "vocabulary's logits on one rank: reduce a few numbers per row instead."
                    )
