"""What `fully_shard` keeps in memory in mixed precision (bf16 parameters, fp32 reduction) with
AdamW, and with gradient accumulation: predicted by a student, checked against the model below,
and measured in a rank with torch's own `FSDPMemTracker`, which follows every storage FSDP2
makes, resizes and frees, and files it under what it is (sharded or whole parameter, gradient,
optimizer state, communication buffer, activation, temporary). It is private to torch
(`torch.distributed._tools`, verified in 2.13): a measurement only, which a torch release may
change; the checks of the student's answer never depend on it."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist

from ..checks import fail
from .common import expect_byte_counts
from .mixed import mixed_precision_model

KEYS = ("states", "gradients", "whole_parameters")


def _units(layers: Sequence[tuple[int, int]]) -> list[int]:
    return [o * i + o for o, i in layers]


def _padded_shard(layers: Sequence[tuple[int, int]], world_size: int) -> int:
    """Elements of rank 0's shards: each parameter's rows padded to a multiple of the world size."""
    return sum(-(-o // world_size) * (i + 1) for o, i in layers)


def fully_shard_memory_reference(
    layers: Sequence[tuple[int, int]],
    world_size: int,
    reshard_after_forward: bool,
    sync_each_micro_batch: bool,
) -> dict[str, int]:
    """The answer to the memory exercise, on rank 0 (which holds the most rows). For the checks."""
    units = _units(layers)
    shard = _padded_shard(layers, world_size)
    if reshard_after_forward:  # the unit computing and, in backward, the one prefetched
        whole = max([a + b for a, b in zip(units, units[1:], strict=False)] or units)
    else:  # every unit stays whole from its forward to its backward
        whole = sum(units)
    return {
        "states": 4 * shard + 8 * shard,  # fp32 shards, which AdamW updates, and its two moments
        # Reduced each micro-batch: an fp32 shard. Not reduced: whole gradients, kept in fp32.
        "gradients": 4 * shard if sync_each_micro_batch else 4 * sum(units),
        "whole_parameters": 2 * whole,
    }


def measure_fully_shard_memory(
    rank: int,
    world_size: int,
    layers: Sequence[tuple[int, int]],
    reshard_after_forward: bool,
    sync_each_micro_batch: bool,
) -> dict:
    """In a rank: linear layers ``(out_features, in_features)``, each its own ``fully_shard`` unit
    in mixed precision, trained with AdamW for two steps of two micro-batches each (the gradients
    reduced every micro-batch, or only in the last). Measured in the second step: the bytes of
    sharded parameters and AdamW's moments before it starts (``states``), the bytes its first
    micro-batch leaves behind (``gradients``), and the most bytes alive at once (``peak``, with
    ``at_peak``: what they were)."""
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed._tools.fsdp2_mem_tracker import _FSDPRefType as Kind

    torch.manual_seed(0)
    model = mixed_precision_model(layers, world_size, reshard_after_forward)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.randn(2, 2, layers[0][1])
    tracker = FSDPMemTracker(model, optimizer)
    tracker.track_inputs((data,))
    cpu = torch.device("cpu")
    measured: dict = {}
    with tracker:
        for step in range(2):
            if step == 1:
                tracker.reset_mod_stats()
                now = tracker.get_tracker_snapshot()[cpu]
                # AdamW's step counters, one 4-byte number a parameter, are not counted.
                counters = 4 * len(list(model.parameters()))
                measured["states"] = now.get(Kind.SHARDED_PARAM, 0) + now.get(Kind.OPT, 0) - counters
            for micro_batch, x in enumerate(data):
                model.set_requires_gradient_sync(sync_each_micro_batch or micro_batch == len(data) - 1)
                model(x).float().square().mean().backward()
                if step == 1 and micro_batch == 0:
                    # Gloo's worker may still hold the last reduce_scatter's input for a moment:
                    # a barrier behind it lets it go. Unreduced gradients accumulate in buffers
                    # made by backward, which the tracker files as temporaries.
                    dist.barrier()
                    now = tracker.get_tracker_snapshot()[cpu]
                    kinds = (Kind.SHARDED_GRAD, Kind.UNSHARDED_GRAD, Kind.TEMP)
                    measured["gradients"] = sum(now.get(kind, 0) for kind in kinds)
                    measured["left_after_backward"] = {
                        kind.value: nbytes for kind, nbytes in now.items() if kind != "Total" and nbytes
                    }
            optimizer.step()
            optimizer.zero_grad()
    at_peak = tracker.get_tracker_snapshot("peak")[cpu]
    measured["peak"] = at_peak["Total"]
    measured["at_peak"] = {
        kind.value: nbytes for kind, nbytes in at_peak.items() if kind != "Total" and nbytes
    }
    return measured


def _mistakes(key: str, layers: list, world_size: int, reshard: bool, sync: bool) -> dict[str, int]:
    """Wrong values of one key, each with the mistake that gives it."""
    units, shard = _units(layers), _padded_shard(layers, world_size)
    psi = sum(units)
    pairs = [a + b for a, b in zip(units, units[1:], strict=False)] or units
    if key == "states":
        return {
            "count a bf16 copy of the parameters between steps (FSDP2 makes it only while a unit "
            "is gathered, and frees it)": 14 * shard,
            "leave out AdamW's two moments (8 bytes a parameter)": 4 * shard,
            "count the moments in bf16 (they are fp32)": 8 * shard,
            "count the whole model (FSDP2 keeps only rank 0's shard of each parameter)": 12 * psi,
            "divide the parameters evenly (rank 0 holds ceil(rows / world_size) rows of each one)": (
                12 * psi // world_size
            ),
            "divide all the parameters together, rounding up (rank 0 holds ceil(rows / world_size) rows "
            "of each one)": 12 * -(-psi // world_size),
            "count the gradient shard among the states (it is its own key)": 16 * shard,
        }
    if key == "gradients":
        if sync:
            return {
                "keep the reduced gradients in bf16 (FSDP2 reduces, and keeps, them in fp32)": 2 * shard,
                "keep whole gradients though each micro-batch reduce_scatters them": 4 * psi,
                "divide the gradients evenly (rank 0's shard has ceil(rows / world_size) rows of each)": 4
                * psi
                // world_size,
            }
        return {
            "count sharded gradients, though without a reduce_scatter no rank has its shard": 4 * shard,
            "accumulate in bf16 (FSDP2 accumulates unreduced gradients in the reduce dtype, fp32)": 2 * psi,
            "count nothing: the gradients must be kept until the micro-batch that reduces them": 0,
        }
    if reshard:
        return {
            "count one unit only: prefetching brings the next unit in while one computes": 2 * max(units),
            "keep every unit whole, though each is freed after its forward and its backward": 2 * psi,
            "count the whole parameters in fp32 (they are gathered in bf16)": 4 * max(pairs),
        }
    return {
        "free the units after forward, though reshard_after_forward=False keeps them whole "
        "until their backward": 2 * max(pairs),
        "count the whole parameters in fp32 (they are gathered in bf16)": 4 * psi,
        "count the padding (whole parameters have their own rows only)": 2
        * sum(-(-o // world_size) * world_size * (i + 1) for o, i in layers),
    }


def check_fully_shard_memory(
    predict: Callable, cases: Sequence[tuple[Sequence[tuple[int, int]], int, bool, bool]]
) -> None:
    """Check ``predict(layers, world_size, reshard_after_forward, sync_each_micro_batch)``,
    rank 0's bytes, against the model the exercise states."""
    __tracebackhide__ = True
    for layers, world_size, reshard, sync in cases:
        layers = [tuple(layer) for layer in layers]
        what = (
            f"fully_shard_memory({layers}, world_size={world_size}, reshard_after_forward={reshard}, "
            f"sync_each_micro_batch={sync})"
        )
        answer = predict(list(layers), world_size, reshard, sync)
        expect_byte_counts(what, answer, KEYS)
        expected = fully_shard_memory_reference(layers, world_size, reshard, sync)
        for key in KEYS:
            if answer[key] == expected[key]:
                continue
            message = f"{what}[{key!r}] is {answer[key]:,} bytes; not what rank 0 holds."
            # Two mistakes may give the same number here: name every one that does.
            matching = [
                mistake
                for mistake, value in _mistakes(key, layers, world_size, reshard, sync).items()
                if answer[key] == value and value != expected[key]
            ]
            if matching:
                message += " That is what you get if you " + ", or if you ".join(matching) + "."
            fail(message)
