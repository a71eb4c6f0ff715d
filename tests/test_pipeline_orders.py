"""Notebook 06's orders of Megatron-LM's interleaved 1F1B and of the zero-bubble schedule are the
orders torch's own schedules run: ``ScheduleInterleaved1F1B`` and ``ScheduleInterleavedZeroBubble``
are built on Gloo ranks and their ``pipeline_order`` compared step by step."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from autograder.pipeline_parallel import make_layer
from autograder.pipeline_parallel.costs import measured_bubble, reference_simulate_interleaved
from autograder.pipeline_parallel.megatron import (
    reference_interleaved_1f1b,
    reference_simulate_zero_bubble,
    torch_order,
    warm_up_forwards,
    zero_bubble_order,
)
from launcher import launch


def _torch_orders(rank: int, world_size: int, name: str, m: int, v: int) -> list:
    from torch.distributed import pipelining

    chunks = [nn.Sequential(make_layer()) for _ in range(v)]
    stages = [
        pipelining.PipelineStage(chunks[c], c * world_size + rank, world_size * v, torch.device("cpu"))
        for c in range(v)
    ]
    schedule = getattr(pipelining, name)(stages, n_microbatches=m, loss_fn=F.mse_loss)
    return torch_order(schedule.pipeline_order[rank], world_size)


@pytest.mark.parametrize("p, v, m", [(2, 2, 2), (2, 3, 6), (3, 2, 6), (4, 2, 4), (4, 2, 8), (4, 3, 8)])
def test_the_orders_are_torchs(p: int, v: int, m: int) -> None:
    ours = launch(_torch_orders, p, "ScheduleInterleaved1F1B", m, v, backend="gloo")
    assert ours == [reference_interleaved_1f1b(p, d, m, v) for d in range(p)]
    zero = launch(_torch_orders, p, "ScheduleInterleavedZeroBubble", m, v, backend="gloo")
    assert zero == [zero_bubble_order(p, d, m, v) for d in range(p)]


@pytest.mark.parametrize("p, v, m", [(2, 2, 4), (3, 2, 6), (4, 2, 8), (4, 3, 12), (4, 4, 8)])
def test_what_the_notebook_teaches_of_them(p: int, v: int, m: int) -> None:
    """Interleaved 1F1B: interleaved GPipe's bubble, (p-1)/v micro-batch times (what notebook 08's
    planner counts), rank 0 holding Korthikanti's L(1 + (p-1)/(pv)) layers' worth at most; the
    zero-bubble order with B = W = half a backward: a third of that bubble."""
    orders = [reference_interleaved_1f1b(p, d, m, v) for d in range(p)]
    times = reference_simulate_interleaved(orders, v, 1 / v, 2 / v)
    step = max(end for _, end in times.values())
    assert step == pytest.approx(3 * m + 3 * (p - 1) / v)
    assert measured_bubble(times, p) == pytest.approx((p - 1) / (v * m + p - 1))
    held = []
    for order in orders:
        alive = most = 0
        for kind, _, _ in order:
            alive += 1 if kind == "F" else -1
            most = max(most, alive)
        held.append(most)
    assert held == [warm_up_forwards(p, d, m, v) for d in range(p)]
    # in stages' worth of layers, L / p each: L (1 + (p - 1) / (p v)) layers
    assert held[0] / v == pytest.approx(min(p * (1 + (p - 1) / (p * v)), m))
    zero = [zero_bubble_order(p, d, m, v) for d in range(p)]
    split = reference_simulate_zero_bubble(zero, v, 1 / v, 1 / v, 1 / v)
    assert max(end for _, end in split.values()) == pytest.approx(3 * m + (p - 1) / v)
