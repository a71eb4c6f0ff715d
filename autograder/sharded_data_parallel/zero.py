"""Checks of notebook 07's ZeRO exercises: the memory per device of each stage, the pieces of a
flat shard, and the ZeRO-1 and ZeRO-2 optimizers (measured: what each rank keeps between steps,
and what its collectives carry)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from ..checks import counted, expect_close, expect_equal, fail, fresh_seed, private_generator, run_ranks
from ..comm import CommLog
from .buckets import PeakBytes, SentBuckets, gradients_loss
from .common import _close, _compare, _counts, _params_like, _Storages, _volumes

GRADIENT_SCALE = 0.01  # the checks' gradients are N(0, 0.01^2): with eps=0.01, Adam sees a missing 1/n


# -- exercise: memory per device ----------------------------------------------------------------


# Bytes a parameter of optimizer state (K, in the ZeRO paper) in mixed precision: the fp32 master
# copy every optimizer updates, and the fp32 running statistics each keeps.
OPTIMIZER_STATE_BYTES = {"adamw": 4 + 4 + 4, "sgd_momentum": 4 + 4, "sgd": 4}


def zero_memory_reference(psi: float, n: int, stage: int, optimizer: str = "adamw") -> float:
    """Bytes per device of mixed-precision training's parameters, gradients and optimizer state
    (for the checks; never shown to students)."""
    return _zero_memory(psi, n, stage, OPTIMIZER_STATE_BYTES[optimizer])


def _zero_memory(psi: float, n: int, stage: int, k: float) -> float:
    """Bytes per device with bf16 parameters and gradients and ``k`` bytes a parameter of state."""
    return (
        2.0 * psi / (n if stage >= 3 else 1)
        + 2.0 * psi / (n if stage >= 2 else 1)
        + k * psi / (n if stage >= 1 else 1)
    )


def _zero_memory_mistakes(psi: float, n: int, stage: int, optimizer: str) -> dict[str, float]:
    """What the typical mistakes give for one case, each with what it did wrong."""
    k = OPTIMIZER_STATE_BYTES[optimizer]
    # In order: where two mistakes give the same number, the first is named.
    mistakes = {}
    if stage == 1:
        mistakes[
            "shard the 16-bit parameters already in stage 1 (stage 1 shards only the optimizer state)"
        ] = 2 * psi / n + 2 * psi + k * psi / n
    if stage + 1 <= 3:
        ahead = (
            "shard the gradients already in stage 1 (that is stage 2)"
            if stage == 1
            else f"give stage {stage} what stage {stage + 1} keeps"
        )
        mistakes[ahead] = zero_memory_reference(psi, n, stage + 1, optimizer)
    if stage >= 1:
        behind = (
            "count the stages one too late (stage 1 sharding nothing)"
            if stage == 1
            else f"give stage {stage} what stage {stage - 1} keeps"
        )
        mistakes[behind] = zero_memory_reference(psi, n, stage - 1, optimizer)
    if optimizer == "adamw":
        mistakes["count 16 bytes of optimizer state per parameter (K=16) instead of 12"] = _zero_memory(
            psi, n, stage, 16
        )
        mistakes["forget the fp32 master copy of the parameters (8 bytes of AdamW state, not 12)"] = (
            _zero_memory(psi, n, stage, 8)
        )
    else:
        mistakes[
            f"count AdamW's 12 bytes a parameter of optimizer state for {optimizer!r}, which keeps less"
        ] = _zero_memory(psi, n, stage, 12)
        mistakes[
            f"forget the fp32 master copy of the parameters: {optimizer!r} in mixed precision still "
            "updates an fp32 copy, or small updates are lost in bf16"
        ] = _zero_memory(psi, n, stage, k - 4)
        if optimizer == "sgd_momentum":
            mistakes["keep the momentum in bf16: it accumulates small updates, as the master copy does"] = (
                _zero_memory(psi, n, stage, 4 + 2)
            )
    return mistakes


def check_zero_memory(
    zero_memory: Callable, cases: Sequence[tuple[float, int, int] | tuple[float, int, int, str]]
) -> None:
    """Check ``zero_memory(psi, n, stage, optimizer)`` on each case, naming the typical mistakes
    (a case of three calls it without ``optimizer``, which is AdamW), and that a stage other than
    0-3, fewer than one device, or an optimizer it does not know is refused with a ValueError."""
    __tracebackhide__ = True
    for psi, n, stage, *rest in cases:
        optimizer = rest[0] if rest else "adamw"
        what = f"zero_memory(psi={psi:g}, n={n}, stage={stage}" + (
            f", optimizer={optimizer!r})" if rest else ")"
        )
        try:
            answer = zero_memory(psi, n, stage, *rest)
        except TypeError as err:
            if rest and "argument" in str(err):
                fail(
                    f"{what} raised TypeError: {err}. zero_memory takes the optimizer as its fourth argument."
                )
            raise
        expect_close(
            answer,
            zero_memory_reference(psi, n, stage, optimizer),
            what,
            rel=1e-6,
            mistakes=_zero_memory_mistakes(psi, n, stage, optimizer),
        )
    refused = {
        (1e9, 8, 4): "there is no stage 4",
        (1e9, 8, -1): "there is no stage -1",
        (1e9, 0, 1): "no devices hold nothing",
        (1e9, -8, 1): "a negative number of devices is no number of devices",
        (1e9, -1, 3): "a negative number of devices is no number of devices",
        (1e9, 8, 3, "lion"): "the optimizer 'lion' is none of 'adamw', 'sgd_momentum' and 'sgd'",
        (1e9, 8, 0, "adam"): "the optimizer 'adam' is none of 'adamw', 'sgd_momentum' and 'sgd'",
    }
    for bad, why in refused.items():
        try:
            zero_memory(*bad)
        except ValueError:
            continue
        except Exception as err:  # noqa: BLE001 - any other error is the wrong kind
            fail(f"zero_memory{bad} raised {type(err).__name__}: {err}; expected a ValueError ({why}).")
        fail(f"zero_memory{bad} returned without complaint; expected a ValueError: {why}.")


# -- exercise: the pieces of a flat shard -----------------------------------------------------------


def check_shard_pieces(shard_pieces: Callable, cases: Sequence[tuple[Sequence[int], int]]) -> None:
    """Check ``shard_pieces(numels, world_size, rank)`` for every rank of each case, exactly, and
    that a rank outside the world is refused with a ValueError."""
    __tracebackhide__ = True
    for numels, world_size in cases:
        total = sum(numels)
        for rank in range(world_size):
            what = f"shard_pieces({list(numels)}, world_size={world_size}, rank={rank})"
            expected = flat_pieces_reference(numels, world_size, rank)
            mistakes = {
                "round the shard size down (the last elements then belong to no rank)": _pieces_with_shard(
                    numels, world_size, rank, total // world_size
                ),
                "give the pieces' offsets in the whole flat buffer, not in the parameter and the shard": [
                    expected[0],
                    [(i, a + sum(numels[:i]), b + rank * expected[0], n) for i, a, b, n in expected[1]],
                ],
                "pad each parameter on its own": _pieces_padded_each(numels, world_size, rank),
            }
            expect_equal(
                _plain(shard_pieces(list(numels), world_size, rank)), list(expected), what, mistakes=mistakes
            )
    numels, world_size = cases[0]
    for rank in (world_size, -1):
        try:
            shard_pieces(list(numels), world_size, rank)
        except ValueError:
            continue
        except Exception as err:  # noqa: BLE001 - any other error is the wrong kind
            fail(
                f"shard_pieces(..., world_size={world_size}, rank={rank}) raised "
                f"{type(err).__name__}; expected a ValueError."
            )
        fail(
            f"shard_pieces(..., world_size={world_size}, rank={rank}) returned; "
            "expected a ValueError (no such rank)."
        )


def _plain(answer: Any) -> Any:
    """The answer as lists (a tuple of tuples is as good as a list of lists)."""
    if isinstance(answer, tuple) and len(answer) == 2:
        answer = list(answer)
    if isinstance(answer, list) and len(answer) == 2 and isinstance(answer[1], (list, tuple)):
        return [answer[0], [list(p) if isinstance(p, tuple) else p for p in answer[1]]]
    return answer


def _pieces_with_shard(numels: Sequence[int], world_size: int, rank: int, shard: int) -> list:
    pieces, start = [], 0
    low, high = rank * shard, (rank + 1) * shard
    for i, n in enumerate(numels):
        a, b = max(start, low), min(start + n, high)
        if a < b:
            pieces.append([i, a - start, a - low, b - a])
        start += n
    return [shard, pieces]


def _pieces_padded_each(numels: Sequence[int], world_size: int, rank: int) -> list:
    pieces, offset = [], 0
    for i, n in enumerate(numels):
        size = -(-n // world_size)
        a, b = rank * size, min((rank + 1) * size, n)
        if a < b:
            pieces.append([i, a, offset, b - a])
        offset += size
    return [offset, pieces]


def flat_pieces_reference(numels: Sequence[int], world_size: int, rank: int) -> tuple[int, list]:
    """The answer to the flat-shard exercise, for the checks (never shown to students)."""
    shard, pieces = _pieces_with_shard(numels, world_size, rank, -(-sum(numels) // world_size))
    return shard, pieces


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
                buckets.append(_scattered_sizes(log.summary()))
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


def _scattered_sizes(summary: dict) -> list[int]:
    """The elements each reduce_scatter was given, in order: the buckets, padded."""
    return [
        contributed or sum(numels)
        for (name, numels), (_, contributed) in zip(summary["calls"], summary["contributed"], strict=True)
        if name == "reduce_scatter"
    ]


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
                _expect_buckets_in_backward(where, result, shapes, hyper["bucket_numel"], share)
                _expect_bucket_sizes(where, result["buckets"], shapes, hyper["bucket_numel"], world_size)


def _expect_buckets_in_backward(
    where: str, result: dict, shapes: Sequence[tuple[int, ...]], bucket_numel: int, share: int
) -> None:
    """Stage 2: every gradient reduce_scattered before backward returned, and at no moment of
    backward more than this rank's shard and a few buckets alive (the whole gradient is more)."""
    __tracebackhide__ = True
    numel = sum(math.prod(s) for s in shapes)
    largest = max(math.prod(s) for s in shapes)
    bucket = max(bucket_numel, largest)
    # The bucket being filled, the gradient arriving, a copy made to pad or send it, and one more
    # that Gloo may hold a moment after sending it; this rank's shard of every bucket.
    allowed = 4 * (share + len(shapes) + 3 * bucket + largest) + 1024
    if numel >= 8 * bucket:  # many buckets large: in any case less than the whole gradient
        allowed = min(allowed, 4 * numel - 1)
    for step, (scattered, (peak, when, kept_sent)) in enumerate(
        zip(result["in_backward"], result["peaks"], strict=True), 1
    ):
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


def _expect_bucket_sizes(
    where: str,
    buckets: list[list[int]],
    shapes: Sequence[tuple[int, ...]],
    bucket_numel: int,
    world_size: int,
) -> None:
    """No bucket larger than ``bucket_numel`` elements, unless it holds one larger parameter alone
    (padded to a multiple of the world size either way)."""
    __tracebackhide__ = True
    largest = max(math.prod(s) for s in shapes)
    bound = -(-max(bucket_numel, largest) // world_size) * world_size
    for step, sizes in enumerate(buckets, 1):
        over = [size for size in sizes if size > bound]
        if over:
            fail(
                f"{where}: in step {step}, a reduce_scatter was given {over[0]} elements; buckets hold at "
                f"most bucket_numel={bucket_numel} (padded to {bound}), a larger parameter alone. Send a "
                "bucket before the next gradient would take it over bucket_numel, not once it has gone "
                "over: the bucket size is what bounds backward's memory."
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
