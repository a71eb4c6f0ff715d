"""Checks of notebook 07's ZeRO-1 and ZeRO-2 optimizers, measured: what each rank keeps between
steps, what its collectives carry, and (ZeRO-2) what backward holds and sends."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ..checks import counted, fail, fresh_seed, private_generator, run_ranks
from ..comm import CommLog
from .buckets import PeakBytes, SentBuckets, gradients_loss
from .common import _close, _compare, _contributions, _counts, _params_like, _Storages, _volumes

GRADIENT_SCALE = 0.01  # the checks' gradients are N(0, 0.01^2): with eps=0.01, Adam sees a missing 1/n


# -- exercises: ZeRO-1 and ZeRO-2 optimizers ---------------------------------------------------------


def _initial_params(shapes: Sequence[tuple[int, ...]], seed: int) -> list[nn.Parameter]:
    generator = torch.Generator().manual_seed(seed)
    return [nn.Parameter(torch.randn(shape, generator=generator)) for shape in shapes]


def _zero_on_rank(
    rank: int,
    world_size: int,
    make_optimizer: Callable,
    shapes: list,
    steps: int,
    hyper: dict,
    seed: int,
    averaged: bool,
) -> dict:
    """Stage 1 (``averaged``): each step's gradients are put in ``.grad``, averaged as DDP would.
    Stage 2: they come from a backward, each rank's own, and the optimizer's hooks take them."""
    params = _initial_params(shapes, seed)  # the same on every rank, as after DDP's broadcast
    generator = private_generator()  # this rank's gradients: no other rank can know them
    storages = _Storages()
    drawn, volumes, counts, kept_grads, in_backward, peaks, buckets = [], [], [], [], [], [], []
    storages.hand_over(params)
    with storages:
        optimizer = make_optimizer(params, **hyper)
    for _ in range(steps):
        local = [GRADIENT_SCALE * torch.randn(p.shape, generator=generator) for p in params]
        drawn.append(local)
        with CommLog(count_collectives=False) as log:
            if averaged:
                for p, g in zip(params, local, strict=True):
                    p.grad = g.clone()
                    dist.all_reduce(p.grad)  # what DDP did before the optimizer's step
                    p.grad /= world_size
                log.calls.clear()
            else:
                loss = gradients_loss(params, local)
                peak, sent = PeakBytes(), SentBuckets()
                with storages, peak, sent:
                    loss.backward()
                del loss
                in_backward.append(_volumes(log.summary()))
                buckets.append([n for name, n in _contributions(log.summary()) if name == "reduce_scatter"])
                peaks.append((peak.peak, peak.when, sent.most_alive))
            storages.hand_over([*params, *(p.grad for p in params)])
            with storages:
                optimizer.step()
        summary = log.summary()
        volumes.append(_volumes(summary))
        counts.append(_counts(summary))
        kept_grads.append([p.grad is not None for p in params])
        for p in params:
            p.grad = None
    kept = storages.alive_sizes(list(params))
    return {
        "params": [p.detach().clone() for p in params],
        "grads": drawn,
        "volumes": volumes,
        "counts": counts,
        "kept_sizes": kept,
        "kept_grads": kept_grads,
        "in_backward": in_backward,
        "peaks": peaks,
        "buckets": buckets,
    }


def _adamw_reference(
    shapes: Sequence[tuple[int, ...]], seed: int, grads_per_step: list[list[torch.Tensor]], hyper: dict
) -> list[torch.Tensor]:
    params = _initial_params(shapes, seed)
    optimizer = torch.optim.AdamW(params, foreach=False, **hyper)
    for grads in grads_per_step:
        for p, g in zip(params, grads, strict=True):
            p.grad = g.clone()
        optimizer.step()
    return [p.detach().clone() for p in params]


def check_zero_optimizer(
    make_optimizer: Callable,
    stage: int,
    world_sizes: Sequence[int] = (2,),
    shapes: Sequence[tuple[int, ...]] = ((33, 17), (17,), (9, 33), (9,)),
    steps: int = 3,
    lr: float = 0.1,
    weight_decay: float = 0.1,
    eps: float = 0.01,
    betas: tuple[float, float] | None = None,
    bucket_numel: int | None = None,
) -> None:
    """Check a ZeRO optimizer, ``make_optimizer(params, lr=, eps=, weight_decay=[, betas=]
    [, bucket_numel=])`` with a ``step()``: after ``steps`` steps every rank's parameters equal plain
    AdamW's on the average of the ranks' gradients; each rank keeps about 1/n of the state. Stage 1
    receives gradients already averaged; stage 2 gets each rank's own from a backward, and must
    reduce_scatter them in buckets of about ``bucket_numel`` elements while backward runs, holding
    no more than a few buckets and its shard at once."""
    __tracebackhide__ = True
    name = getattr(make_optimizer, "__name__", "the optimizer")
    hyper: dict[str, Any] = {"lr": lr, "eps": eps, "weight_decay": weight_decay}
    if betas is not None:
        hyper["betas"] = tuple(betas)
    if stage == 2:
        hyper["bucket_numel"] = bucket_numel or max(math.prod(s) for s in shapes)
    numel = sum(math.prod(s) for s in shapes)
    seed = fresh_seed() % (1 << 31)
    for world_size in world_sizes:
        what = f"{name} on {counted(world_size, 'rank')}, {numel} parameters in {len(shapes)} tensors"
        if stage == 2:
            what += f", buckets of {hyper['bucket_numel']} elements"
        per_rank = run_ranks(
            _zero_on_rank, world_size, make_optimizer, list(shapes), steps, hyper, seed, stage == 1, what=name
        )
        average = [
            [sum(r["grads"][s][i] for r in per_rank) / world_size for i in range(len(shapes))]
            for s in range(steps)
        ]
        adamw = {k: v for k, v in hyper.items() if k != "bucket_numel"}
        reference = _adamw_reference(shapes, seed, average, adamw)
        summed = _adamw_reference(shapes, seed, [[g * world_size for g in step] for step in average], adamw)
        default_betas = _adamw_reference(shapes, seed, average, {**adamw, "betas": (0.9, 0.999)})
        share = -(-numel // world_size)
        # Stage 2's shard is a piece of each bucket, each bucket padded on its own.
        allowed = (12 * share if stage == 1 else 16 * (share + len(shapes))) + 256
        for rank, result in enumerate(per_rank):
            where = f"{what}: rank {rank}"
            _params_like(where, result["params"], reference)
            kept = sum(result["kept_sizes"])
            if kept > allowed:
                fail(
                    f"{where} keeps {kept} bytes of its own between steps; "
                    f"its 1/{world_size} share is {share} elements, so it may keep at most {allowed} bytes "
                    f"({12 if stage == 1 else 16} bytes per element of its shard, and 256 more)."
                    f"{_kept_hint(result['kept_sizes'], shapes, numel)}"
                    + (
                        " A bucket's flat gradient is not needed once it is sent: keep only its shard."
                        if stage == 2
                        else ""
                    )
                )
            if stage == 2 and any(any(kept) for kept in result["kept_grads"]):
                fail(
                    f"{where}: after step() some parameters still hold a .grad. In stage 2 a rank keeps only "
                    "its shard of the reduced gradients: set every p.grad to None once they are reduced."
                )
            mistakes = {}
            if stage == 2 and world_size > 1:
                mistakes["sum the gradients over the ranks without dividing by the world size"] = summed
                mistakes[
                    "divide by the world size twice (a reduce_scatter with ReduceOp.AVG has averaged already)"
                ] = _adamw_reference(
                    shapes, seed, [[g / world_size for g in step] for step in average], adamw
                )
            if tuple(hyper.get("betas", (0.9, 0.999))) != (0.9, 0.999):
                mistakes[f"use betas (0.9, 0.999) where the optimizer was given betas={hyper['betas']}"] = (
                    default_betas
                )
            if not all(_close(p, r) for p, r in zip(result["params"], reference, strict=True)):
                shared = sum(_shared(v) + v.get("all_reduce", 0) for v in result["volumes"])
                if world_size > 1 and not shared:
                    fail(
                        f"{where}: its parameters differ from plain AdamW's, and it never shared its updated "
                        "shard: each rank updated only its own shard, so the other ranks' updates never "
                        "reached it. After the update, all_gather the updated shards into every rank's "
                        "parameters."
                    )
                _compare(
                    where, result["params"], reference, "plain AdamW on the averaged gradients", mistakes
                )
            for step, (volumes, counts) in enumerate(
                zip(result["volumes"], result["counts"], strict=True), 1
            ):
                _expect_zero_communication(
                    where, step, stage, volumes, counts, numel, len(shapes), world_size
                )
            if stage == 2 and world_size > 1:
                _expect_buckets_in_backward(where, result, shapes, hyper["bucket_numel"], share, world_size)


def _expect_buckets_in_backward(
    where: str,
    result: dict,
    shapes: Sequence[tuple[int, ...]],
    bucket_numel: int,
    share: int,
    world_size: int,
) -> None:
    """Stage 2: every gradient reduce_scattered before backward returned, no bucket larger than
    ``bucket_numel`` elements unless it holds one larger parameter alone (padded to a multiple of
    the world size either way), and at no moment of backward more than this rank's shard and a few
    buckets alive (the whole gradient is more)."""
    __tracebackhide__ = True
    numel = sum(math.prod(s) for s in shapes)
    largest = max(math.prod(s) for s in shapes)
    bucket = max(bucket_numel, largest)
    padded = -(-bucket // world_size) * world_size
    # The bucket being filled, the gradient arriving, a copy made to pad or send it, and one more
    # that Gloo may hold a moment after sending it; this rank's shard of every bucket.
    allowed = 4 * (share + len(shapes) + 3 * bucket + largest) + 1024
    if numel >= 8 * bucket:  # many buckets large: in any case less than the whole gradient
        allowed = min(allowed, 4 * numel - 1)
    for step, (scattered, (peak, when, kept_sent), sizes) in enumerate(
        zip(result["in_backward"], result["peaks"], result["buckets"], strict=True), 1
    ):
        over = [size for size in sizes if size > padded]
        if over:
            fail(
                f"{where}: in step {step}, a reduce_scatter was given {over[0]} elements; buckets hold at "
                f"most bucket_numel={bucket_numel} (padded to {padded}), a larger parameter alone. Send a "
                "bucket before the next gradient would take it over bucket_numel, not once it has gone "
                "over: the bucket size is what bounds backward's memory."
            )
        sent = scattered.get("reduce_scatter", 0)
        if sent < numel:
            fail(
                f"{where}: in step {step}, the reduce_scatters issued while backward ran carried {sent} of "
                f"the {numel} gradients. Each bucket should be reduced from the gradient hooks as soon as "
                "its last gradient is in, during backward, not after it (in step())."
            )
        if kept_sent > 1:
            fail(
                f"{where}: in step {step}, when a bucket's reduce_scatter was issued, {kept_sent} buckets "
                "sent before it were still alive. Keep no bucket once it is sent (once its reduce_scatter "
                "is waited on, if asynchronous): only its shard stays."
            )
        if peak > allowed:
            fail(
                f"{where}: in step {step}, the tensors made while backward ran held {peak} bytes at once "
                f"(after torch's {when}); the whole fp32 gradient is {4 * numel} bytes, while buckets of "
                f"{bucket_numel} elements and this rank's shard need no more than about {allowed}. Copy each "
                "gradient into its bucket and drop it (p.grad = None), reduce_scatter each bucket when it is "
                "full, and keep no bucket once it is sent: only its shard."
            )


def _kept_hint(sizes: list[int], shapes: Sequence[tuple[int, ...]], numel: int) -> str:
    """What the storages a rank kept say about its mistake, if they say something."""
    whole = [size for size in sizes if size >= 4 * numel]
    left = list(sizes)
    per_parameter = True
    for shape in shapes:  # two fp32 tensors of each parameter's size: moments for every parameter
        for _ in range(2):
            if 4 * math.prod(shape) in left:
                left.remove(4 * math.prod(shape))
            else:
                per_parameter = False
    if per_parameter:
        return (
            " Among them are two fp32 tensors the size of every parameter: Adam's two moments for every "
            "parameter. Does every rank update every parameter? Each should keep state, and update, for "
            "its own shard only."
        )
    if len(whole) >= 2:
        return (
            f" Among them are {len(whole)} tensors each as large as the whole model in fp32 ({4 * numel} "
            "bytes): whole flat copies (of the parameters, the gradients or the moments?) kept from step to "
            "step. Keep only this rank's shard of each; a whole buffer step() needs can be made inside it "
            "and let go."
        )
    if whole:
        return (
            f" Among them is a tensor of {whole[0]} bytes, as large as the whole model in fp32 ({4 * numel} "
            "bytes): a whole flat copy of the parameters or gradients, kept from step to step? Keep only "
            "this rank's shard; a whole buffer step() needs can be made inside it and let go."
        )
    return f" The largest tensors it keeps: {sizes[:4]} bytes."


def _shared(volumes: dict) -> int:
    """Elements of updated parameters a step sent to every rank: by all_gather, or by each rank
    broadcasting its shard (torch's ZeroRedundancyOptimizer does that: the same bytes)."""
    return volumes.get("all_gather", 0) + volumes.get("broadcast", 0)


def _expect_zero_communication(
    where: str, step: int, stage: int, volumes: dict, counts: dict, numel: int, tensors: int, world_size: int
) -> None:
    __tracebackhide__ = True
    if world_size == 1:
        return
    slack = world_size * tensors  # padding, if each tensor is padded on its own
    gathered = _shared(volumes)
    scattered = volumes.get("reduce_scatter", 0)
    reduced = volumes.get("all_reduce", 0)
    gradients_scattered = stage == 1 or numel <= scattered
    if reduced and not gathered and gradients_scattered and numel <= reduced:
        fail(
            f"{where}: step {step} shared the updated parameters with {counts['all_reduce']} all_reduce(s) "
            f"of {reduced} elements (each rank's shard in a buffer of zeros, summed?) and no all_gather. "
            "That gives every rank every shard, but an all_reduce sends twice an all_gather's bytes: "
            "all_gather the updated shards."
        )
    if stage == 1 and counts.get("all_reduce"):
        fail(
            f"{where}: step {step} issued {counts['all_reduce']} all_reduce(s). In stage 1 the gradients "
            "arrive averaged already; the step needs only to share the updated shards."
        )
    if stage == 2:
        if counts.get("all_reduce"):
            fail(
                f"{where}: step {step} issued {counts['all_reduce']} all_reduce(s) of "
                f"{volumes['all_reduce']} elements. Each rank needs only its own shard of the summed "
                "gradients: a reduce_scatter gives it that, at half an all_reduce's cost. (An all_reduce "
                "then a slice sends twice the bytes and keeps a whole gradient on every rank.)"
            )
        if not numel <= scattered <= numel + slack:
            fail(
                f"{where}: step {step}'s reduce_scatters carried {scattered} elements; expected the "
                f"{numel} gradients once (with a little padding)."
            )
    if not numel <= gathered <= numel + slack:
        fail(
            f"{where}: step {step}'s all_gathers (and broadcasts) carried {gathered} elements; expected "
            f"the {numel} updated parameters once (with a little padding): every rank needs every "
            "updated shard."
        )
    expected = ("all_gather", "broadcast", "reduce_scatter", "all_reduce")
    others = {k: v for k, v in counts.items() if k not in expected}
    if others:
        fail(f"{where}: step {step} also issued {others}; the step needs none of them.")
