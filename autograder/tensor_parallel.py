"""Checks for notebook 05 (tensor parallelism).

Inside each rank, the checks draw that rank's shards of the weights (and, where the input is
split, its slice of the input) at random from a generator no other process can reproduce, keep a
private copy, and hand the student's code only the shards: no rank can compute the others' part
without communicating, and no full weight exists in a rank for code to find. Where the code is
given a whole ``nn.Linear``, every entry outside the rank's shard is NaN. What is replicated by
design (the input of a layer, a row-parallel layer's bias, the targets) comes from a seed each
check draws afresh. The ranks return their private copies; the full layers are assembled here,
in the checking process, and their outputs and gradients are the reference.

What each rank sends is recorded as well (with torch's CommDebugMode and a dispatch mode beside
it, through `CommLog`): which collectives, forward and backward apart, and how many elements
each carried, so that a collective that carries the wrong thing (whole weights, padded logits)
fails even when the result is right.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import launcher

from .checks import counted, expect_floats, fail, fresh_seed, private_generator, run_ranks
from .comm import CommLog

launcher.preload("autograder.tensor_parallel")

DIM, HIDDEN = 12, 48  # divisible by 1, 2, 3 and 4
_type = type


def _shared(seed: int, offset: int) -> torch.Generator:
    """The same numbers on every rank and here: for what every rank holds by design."""
    return torch.Generator().manual_seed(seed + offset)


def _rows(n: int, rank: int, world_size: int) -> slice:
    size = n // world_size
    return slice(rank * size, (rank + 1) * size)


def _nan_linear(in_features: int, out_features: int) -> nn.Linear:
    """An nn.Linear whose entries are all NaN until a rank fills in its own shard."""
    layer = nn.Linear(in_features, out_features)
    with torch.no_grad():
        layer.weight.fill_(math.nan)
        layer.bias.fill_(math.nan)
    return layer


def _expect(
    what: str, actual: Any, expected: torch.Tensor, hints: dict[str, torch.Tensor] | None = None
) -> None:
    __tracebackhide__ = True
    expect_floats(what, actual, expected, "the unsharded layer's", mistakes=hints, nan_means=_NAN)


_NAN = (
    "Each rank was given only its own shard of the weights (the rest of the full layer is NaN): use "
    "only this rank's share."
)


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


def _carried(what: str, summary: dict, name: str, elements: int, meaning: str) -> None:
    """Every ``name`` collective the rank issued must carry ``elements`` of its own: ``meaning``."""
    __tracebackhide__ = True
    sizes = [n for op, n in summary["contributed"] if op == name]
    wrong = [n for n in sizes if n != elements]
    if wrong:
        fail(
            f"{what}: an {name} carried {wrong[0]} elements from this rank; expected {elements}, {meaning}. "
            "The right result reached by sending something else is not tensor parallelism."
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


def _column_shard(world_size: int, mine: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's rows of fc1 (DIM -> HIDDEN) and entries of its bias."""
    n = HIDDEN // world_size
    return torch.randn(n, DIM, generator=mine) / math.sqrt(DIM), torch.randn(n, generator=mine)


def _row_shard(world_size: int, mine: torch.Generator) -> torch.Tensor:
    """This rank's columns of fc2 (HIDDEN -> DIM)."""
    return torch.randn(DIM, HIDDEN // world_size, generator=mine) / math.sqrt(HIDDEN)


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


# -- exercise: attention with its heads split across the ranks -----------------------------------

ATTENTION_DIM, HEADS = 24, 12  # head dimension 2; 12 heads divide among 1, 2, 3 or 4 ranks


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


def _attention_on_rank(rank: int, world_size: int, fn: Callable, seed: int, batch: int, seq: int) -> tuple:
    mine = private_generator()
    n, scale = ATTENTION_DIM // world_size, 1 / math.sqrt(ATTENTION_DIM)
    wq, wk, wv = (torch.randn(n, ATTENTION_DIM, generator=mine) * scale for _ in range(3))
    wo = torch.randn(ATTENTION_DIM, n, generator=mine) * scale
    x = torch.randn(batch, seq, ATTENTION_DIM, generator=_shared(seed, 5))
    with torch.no_grad(), CommLog() as log:
        out = fn(x, wq.clone(), wk.clone(), wv.clone(), wo.clone(), HEADS // world_size)
    return out, log.summary(), (wq, wk, wv, wo)


def check_tensor_parallel_attention(
    fn: Callable, world_sizes: Sequence[int] = (2,), batch: int = 2, seq: int = 5
) -> None:
    """Check ``fn(x, wq, wk, wv, wo, heads)``: this rank's ``heads`` heads (its rows of wq, wk, wv,
    its columns of wo); every rank returns the whole attention output, with one all_reduce of it."""
    __tracebackhide__ = True
    for world_size in world_sizes:
        seed = fresh_seed()
        what = f"attention with {HEADS} heads on {counted(world_size, 'rank')}"
        per_rank = run_ranks(_attention_on_rank, world_size, fn, seed, batch, seq, what="the attention")
        weights = [torch.cat([shards[i] for _, _, shards in per_rank]) for i in range(3)]
        weights.append(torch.cat([shards[3] for _, _, shards in per_rank], dim=1))
        x = torch.randn(batch, seq, ATTENTION_DIM, generator=_shared(seed, 5))
        expected = reference_attention(x, *weights, HEADS)
        hints = {
            "leave the scores undivided by the square root of the head dimension": reference_attention(
                x, *weights, HEADS, scaled=False
            ),
            "softmax over the queries rather than the keys": reference_attention(x, *weights, HEADS, over=-2),
        }
        for rank, (out, summary, _) in enumerate(per_rank):
            _expect(f"{what}: rank {rank}'s output", out, expected, hints)
            if world_size > 1:
                _counts(f"{what}: rank {rank}", summary, {"all_reduce": 1})
                _carried(
                    f"{what}: rank {rank}",
                    summary,
                    "all_reduce",
                    batch * seq * ATTENTION_DIM,
                    "its heads' partial sum of the output",
                )


# -- exercise: sequence parallelism --------------------------------------------------------------

SEQUENCE = 12


def _sequence_on_rank(rank: int, world_size: int, fn: Callable) -> tuple:
    mine = private_generator()
    x = torch.randn(SEQUENCE // world_size, DIM, generator=mine)
    w1, _ = _column_shard(world_size, mine)
    w2 = _row_shard(world_size, mine)
    with torch.no_grad(), CommLog() as log:
        out = fn(x.clone(), w1.clone(), w2.clone())
    return out, log.summary(), (x, w1, w2)


def check_sequence_parallel(fn: Callable, world_sizes: Sequence[int] = (2,)) -> None:
    """Check ``fn(x_tokens, w1, w2)``: the MLP ``gelu(x @ w1.T) @ w2.T`` (no biases) with its input
    and output split by tokens and its weights split as Megatron's; one all_gather of this rank's
    tokens and one reduce_scatter of its part of every token's output, no all_reduce."""
    __tracebackhide__ = True
    for world_size in world_sizes:
        what = f"the sequence-parallel MLP on {counted(world_size, 'rank')}, {SEQUENCE} tokens"
        per_rank = run_ranks(_sequence_on_rank, world_size, fn, what="the sequence-parallel MLP")
        x = torch.cat([shards[0] for _, _, shards in per_rank])
        w1 = torch.cat([shards[1] for _, _, shards in per_rank])
        w2 = torch.cat([shards[2] for _, _, shards in per_rank], dim=1)
        full = F.gelu(x @ w1.T) @ w2.T
        for rank, (out, summary, _) in enumerate(per_rank):
            _expect(
                f"{what}: rank {rank}'s output (its tokens)", out, full[_rows(SEQUENCE, rank, world_size)]
            )
            if world_size == 1:
                continue
            if summary["collectives"].get("all_reduce"):
                fail(
                    f"{what}: rank {rank} issued an all_reduce. An all_reduce leaves every rank the whole "
                    "output, of which it keeps a slice; a reduce_scatter sends each rank only its tokens."
                )
            _counts(f"{what}: rank {rank}", summary, {"all_gather": 1, "reduce_scatter": 1})
            tokens = SEQUENCE // world_size
            _carried(f"{what}: rank {rank}", summary, "all_gather", tokens * DIM, "its tokens of the input")
            _carried(
                f"{what}: rank {rank}",
                summary,
                "reduce_scatter",
                SEQUENCE * DIM,
                "its part of every token's output",
            )


# -- exercise: cross-entropy over a vocabulary split across ranks --------------------------------

VOCAB, ROWS = 24, 6
_NUMBERS_PER_ROW = 3  # a generous bound on what a rank needs to share per row: max, sum, target


def _cross_entropy_on_rank(rank: int, world_size: int, fn: Callable, seed: int, scale: float) -> tuple:
    logits = torch.randn(ROWS, VOCAB // world_size, generator=private_generator()) * 3 + scale
    targets = torch.randint(0, VOCAB, (ROWS,), generator=_shared(seed, 8))
    with torch.no_grad(), CommLog() as log:
        loss = fn(logits.clone(), targets.clone(), rank * (VOCAB // world_size))
    return loss, log.summary(), logits


def check_vocab_parallel_cross_entropy(
    fn: Callable, world_sizes: Sequence[int] = (2,), scales: Sequence[float] = (0.0,)
) -> None:
    """Check ``fn(logits_shard, targets, vocab_start)``: the mean cross-entropy over the rows, equal
    on every rank to ``F.cross_entropy`` of the whole logits, with no collective carrying more than
    a few numbers per row from any rank."""
    __tracebackhide__ = True
    for scale in scales:
        for world_size in world_sizes:
            seed = fresh_seed()
            what = f"the cross-entropy on {counted(world_size, 'rank')}, logits around {scale:g}"
            per_rank = run_ranks(
                _cross_entropy_on_rank, world_size, fn, seed, scale, what="the cross-entropy"
            )
            logits = torch.cat([shard for _, _, shard in per_rank], dim=1)
            targets = torch.randint(0, VOCAB, (ROWS,), generator=_shared(seed, 8))
            expected = F.cross_entropy(logits.double(), targets)
            for rank, (loss, summary, _) in enumerate(per_rank):
                if _type(loss) is torch.Tensor and loss.dim() == 0 and not torch.isfinite(loss):
                    fail(
                        f"{what}: rank {rank}'s loss is {loss.item()}. exp() of logits near {scale:g} "
                        "overflows: subtract the largest logit (over the whole vocabulary) before "
                        "exponentiating."
                    )
                _expect(f"{what}: rank {rank}'s loss", loss, expected)
                for name, n in summary["contributed"]:
                    if n > _NUMBERS_PER_ROW * ROWS:
                        fail(
                            f"{what}: rank {rank} put {n} elements into one {name}; its shard of the logits "
                            f"has {ROWS * VOCAB // world_size}. The point is never to hold the whole "
                            f"vocabulary's logits on one rank: exchange a few numbers per row ({ROWS} rows)."
                        )
