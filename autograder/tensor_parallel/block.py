"""Notebook 05's check of sequence parallelism: a pre-LayerNorm MLP block whose LayerNorm and
residual work on each rank's tokens, and whose two layers are split as Megatron's."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..checks import counted, fail, fresh_seed, private_generator, run_ranks
from ..comm import CommLog
from .kept import KeptAfterForward, gathered_kept
from .shards import (
    DIM,
    HIDDEN,
    _carried,
    _column_shard,
    _counts,
    _expect,
    _expect_own_storage,
    _row_shard,
    _rows,
    _shared,
    _storage,
    _type,
)

SEQUENCE = 12  # tokens: divisible by 1, 2, 3 and 4
_PARAMETERS = ("norm.weight", "norm.bias", "fc1.weight", "fc2.weight")


def _norm(seed: int) -> nn.LayerNorm:
    """The LayerNorm every rank holds whole (the same on every rank and here)."""
    shared = _shared(seed, 5)
    norm = nn.LayerNorm(DIM)
    with torch.no_grad():
        norm.weight.copy_(1 + 0.5 * torch.randn(DIM, generator=shared))
        norm.bias.copy_(torch.randn(DIM, generator=shared))
    return norm


def _linear_with_shard(in_features: int, out_features: int, shard: torch.Tensor, where: Any) -> nn.Linear:
    """A bias-free nn.Linear that is NaN except for this rank's shard."""
    layer = nn.Linear(in_features, out_features, bias=False)
    with torch.no_grad():
        layer.weight.fill_(float("nan"))
        layer.weight[where] = shard
    return layer


def _gradient(module: Any, dotted: str) -> Any:
    value = module
    for name in dotted.split("."):
        value = getattr(value, name, None)
    grad = getattr(value, "grad", None)
    return grad.detach().clone() if isinstance(grad, torch.Tensor) else grad


def _comm_log() -> CommLog:
    """A recorder of collectives that counts them from their calls, without CommDebugMode: its module
    tracker raises KeyError in torch 2.13 when a module runs again inside the backward pass, as
    activation checkpointing (a right answer here) makes fc1 do."""
    return CommLog(count_collectives=False)


def _summary(log: CommLog) -> dict:
    summary = log.summary()
    summary["collectives"] = dict(Counter(name for name, _ in summary["calls"]))
    return summary


def _block_on_rank(rank: int, world_size: int, cls: Callable, seed: int) -> dict:
    mine = private_generator()
    tokens = SEQUENCE // world_size
    x = torch.randn(tokens, DIM, generator=mine).requires_grad_(True)  # inside a model, it needs one
    w1, _ = _column_shard(world_size, mine)
    w2 = _row_shard(world_size, mine)
    share = _rows(HIDDEN, rank, world_size)
    fc1 = _linear_with_shard(DIM, HIDDEN, w1, share)
    fc2 = _linear_with_shard(HIDDEN, DIM, w2, (slice(None), share))
    block = cls(_norm(seed), fc1, fc2, rank, world_size)
    normalised = []  # the tokens of every input the block's LayerNorm was called on
    if isinstance(getattr(block, "norm", None), nn.Module):
        block.norm.register_forward_pre_hook(lambda module, args: normalised.append(args[0].shape[0]))
    upstream = torch.randn(tokens, DIM, generator=mine)
    with _comm_log() as forward, KeptAfterForward() as watch:
        y = block(x)
    given = [x, upstream, fc1.weight, fc2.weight]
    own = list(block.parameters()) + list(block.buffers()) if isinstance(block, nn.Module) else []
    kept = watch.kept(besides=[y, *given, *own])  # what the block keeps for its backward pass
    with _comm_log() as backward:
        if _type(y) is torch.Tensor and y.shape == x.shape and y.requires_grad:
            (y * upstream).sum().backward()
    with _comm_log() as after:
        block.reduce_norm_gradients()
    return {
        "y": y.detach() if _type(y) is torch.Tensor else y,
        "x.grad": x.grad,
        "grads": {name: _gradient(block, name) for name in _PARAMETERS},
        "forward": _summary(forward),
        "backward": _summary(backward),
        "after": _summary(after),
        "inputs": (x.detach(), w1, w2, upstream),
        "normalised": normalised,
        "stored": _storage(block),
        "kept": kept,
    }


def _shard_bytes(inputs: tuple) -> int:
    """What a rank's block must keep: the whole LayerNorm, and its shards of fc1 and fc2."""
    _, w1, w2, _ = inputs
    return 2 * DIM * 4 + (w1.numel() + w2.numel()) * w1.element_size()


def _unsharded_block(per_rank: list[dict], seed: int, world_size: int) -> tuple:
    """The whole block from the ranks' shards and tokens: its output, the gradients of the loss
    that sums every rank's term, and the LayerNorm's gradients from each rank's own term alone."""
    x = torch.cat([got["inputs"][0] for got in per_rank]).requires_grad_(True)
    w1 = torch.cat([got["inputs"][1] for got in per_rank]).requires_grad_(True)
    w2 = torch.cat([got["inputs"][2] for got in per_rank], dim=1).requires_grad_(True)
    upstreams = [got["inputs"][3] for got in per_rank]
    norm = _norm(seed)
    y = x + F.gelu(norm(x) @ w1.T) @ w2.T
    grads = torch.autograd.grad(
        y, (x, norm.weight, norm.bias, w1, w2), torch.cat(upstreams), retain_graph=True
    )
    alone = []
    for rank in range(world_size):
        only = torch.zeros_like(y)
        only[_rows(SEQUENCE, rank, world_size)] = upstreams[rank]
        norm_grads = torch.autograd.grad(y, (norm.weight, norm.bias), only, retain_graph=True)
        # x's gradient had the gather's backward not summed the ranks' parts: through this
        # rank's features only
        share = _rows(HIDDEN, rank, world_size)
        through_mine = x + F.gelu(norm(x) @ w1[share].T) @ w2[:, share].T
        (x_grad,) = torch.autograd.grad(through_mine, x, torch.cat(upstreams))
        alone.append((*norm_grads, x_grad))
    return y.detach(), grads, alone


def check_sequence_parallel_block(cls: Callable, world_sizes: Sequence[int] = (2,)) -> None:
    """Check ``cls(norm, fc1, fc2, rank, world_size)``: ``x + fc2(gelu(fc1(norm(x))))`` on this
    rank's tokens, with fc1 column- and fc2 row-parallel (no biases), an all_gather of the tokens
    before fc1 and a reduce_scatter after fc2 (and their adjoints backward); after
    ``reduce_norm_gradients()``, every gradient that of the whole block (each shard's its slice).
    Each rank keeps its shards in storage of their own, and its LayerNorm sees its tokens only.
    After the forward pass, nothing a rank keeps holds the other ranks' tokens (Megatron keeps a
    rank's shard of fc1's input and gathers it again in backward: one more all_gather there)."""
    __tracebackhide__ = True
    for world_size in world_sizes:
        seed = fresh_seed()
        what = f"the sequence-parallel block on {counted(world_size, 'rank')}, {SEQUENCE} tokens"
        per_rank = run_ranks(_block_on_rank, world_size, cls, seed, what="SequenceParallelBlock")
        y, grads, alone = _unsharded_block(per_rank, seed, world_size)
        x_grad, norm_weight, norm_bias, w1, w2 = grads
        for rank, got in enumerate(per_rank):
            where = f"{what}, rank {rank}"
            tokens, share = _rows(SEQUENCE, rank, world_size), _rows(HIDDEN, rank, world_size)
            _expect(f"{where}: output (its tokens)", got["y"], y[tokens])
            _expect_own_storage(where, got["stored"], _shard_bytes(got["inputs"]))
            if world_size > 1 and any(n > SEQUENCE // world_size for n in got["normalised"]):
                fail(
                    f"{where}: its LayerNorm ran on {max(got['normalised'])} tokens, the gathered sequence. "
                    f"In sequence parallelism each rank normalises its own {SEQUENCE // world_size} tokens, "
                    "before the all_gather: the LayerNorm's work and the activations it keeps for backward "
                    "are then split across the ranks too."
                )
            if world_size > 1:
                _no_all_reduce(f"{where}: the forward pass", got["forward"])
                _counts(f"{where}: the forward pass", got["forward"], {"all_gather": 1, "reduce_scatter": 1})
                _carried(where, got["forward"], "all_gather", SEQUENCE // world_size * DIM, "its tokens")
                _carried(
                    where,
                    got["forward"],
                    "reduce_scatter",
                    SEQUENCE * DIM,
                    "its part of every token's output",
                )
                _kept_only_its_tokens(where, got["kept"], per_rank, rank, seed, world_size)
            unsummed = {
                "keep this rank's part of the input's gradient, not the ranks' sum": alone[rank][2][tokens]
            }
            _expect(f"{where}: x's gradient (its tokens)", got["x.grad"], x_grad[tokens], unsummed)
            shares = [_rows(HIDDEN, other, world_size) for other in range(world_size)]
            summed = {"all_reduce the shards' gradients too": sum(w1[other] for other in shares)}
            _expect(
                f"{where}: fc1.weight's gradient (its rows)", got["grads"]["fc1.weight"], w1[share], summed
            )
            summed = {"all_reduce the shards' gradients too": sum(w2[:, other] for other in shares)}
            _expect(
                f"{where}: fc2.weight's gradient (its columns)",
                got["grads"]["fc2.weight"],
                w2[:, share],
                summed,
            )
            partial = "leave it with only what this rank's own tokens contribute"
            _expect(
                f"{where}: norm.weight's gradient",
                got["grads"]["norm.weight"],
                norm_weight,
                {partial: alone[rank][0]} if world_size > 1 else None,
            )
            _expect(
                f"{where}: norm.bias's gradient",
                got["grads"]["norm.bias"],
                norm_bias,
                {partial: alone[rank][1]} if world_size > 1 else None,
            )
            if world_size > 1:
                _backward_collectives(where, got["backward"], got["after"], world_size)


def _backward_collectives(where: str, backward: dict, after: dict, world_size: int) -> None:
    """Backward: the adjoints of the forward's two collectives; and, in the backward pass or
    after it, all_reduces of the LayerNorm's gradients and nothing else."""
    __tracebackhide__ = True
    others = {name: n for name, n in backward["collectives"].items() if name != "all_reduce"}
    backward = {**backward, "collectives": others}
    # all_gathers: the gradient of its tokens of the output, and fc1's input, gathered again
    _counts(f"{where}: the backward pass", backward, {"all_gather": 2, "reduce_scatter": 1})
    tokens = SEQUENCE // world_size
    _carried(
        where,
        backward,
        "all_gather",
        tokens * DIM,
        "its tokens (of the output's gradient, and of fc1's input gathered again)",
    )
    _carried(where, backward, "reduce_scatter", SEQUENCE * DIM, "its part of every token's gradient")
    reduced = [
        sum(sizes)
        for summary in (backward, after)
        for name, sizes in summary["calls"]
        if name == "all_reduce"
    ]
    if sum(reduced) != 2 * DIM:
        fail(
            f"{where}: the backward pass and reduce_norm_gradients() all_reduced {sum(reduced)} values in "
            f"all; the gradients that need it hold {2 * DIM}."
        )


def _no_all_reduce(what: str, summary: dict) -> None:
    """Name where an all_reduce was used: to gather the input's tokens (the first collective,
    with the layers' still to come), or to sum the output."""
    __tracebackhide__ = True
    names = [name for name, _ in summary["calls"]]
    if "all_reduce" not in names:
        return
    if names[0] == "all_reduce" and len(names) > 1:
        fail(
            f"{what} gathered the input's tokens with an all_reduce (each rank's tokens in a zeroed tensor "
            "of every token, summed): every rank sends and receives the whole input where an all_gather "
            "would send each its own tokens once."
        )
    fail(
        f"{what} summed the output with an all_reduce. An all_reduce leaves every rank every token's "
        "output, of which it keeps its own slice; the token-split part needs only its own tokens."
    )


def _kept_only_its_tokens(
    where: str, kept: list[dict], per_rank: list[dict], rank: int, seed: int, world_size: int
) -> None:
    """After the forward pass, nothing the rank keeps may hold the other ranks' tokens: fc1's input,
    gathered, is needed by fc1's weight gradient, but keeping it whole makes every rank keep every
    token's activation, which sequence parallelism exists to split."""
    __tracebackhide__ = True
    with torch.no_grad():
        x = torch.cat([got["inputs"][0] for got in per_rank])
        normalised = _norm(seed)(x)
    others = []
    for other in range(world_size):
        if other != rank:
            tokens = _rows(SEQUENCE, other, world_size)
            others += [normalised[tokens], x[tokens]]
    found = gathered_kept(kept, others)
    if found is None:
        return
    size = f"{found['bytes']} bytes"
    if found["saved"] is None:
        how = (
            f"keeps alive, once it has returned, a tensor of {size} that holds the other ranks' tokens "
            "(fc1's gathered input), though autograd did not save it: an attribute of ctx, a list, a "
            "closure or a checkpoint's input keeps it just the same"
        )
    elif found["saved"] < found["bytes"]:
        how = (
            f"saved for backward a tensor of {found['saved']} bytes that is a view into a storage of {size} "
            "holding every rank's tokens (fc1's gathered input): a slice shares its tensor's storage, so the "
            "whole gathered input stays alive"
        )
    else:
        how = (
            f"saved for backward fc1's gathered input ({size}, every rank's tokens), which fc1's weight "
            "gradient needs"
        )
    fail(
        f"{where}: the forward pass {how}. Each rank then keeps all {SEQUENCE} tokens of fc1's input where "
        f"sequence parallelism promises its own {SEQUENCE // world_size}. Keep for the "
        "backward pass only this rank's tokens of fc1's input, and all_gather them again in the backward "
        "pass, as Megatron-LM does."
    )
