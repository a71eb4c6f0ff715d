"""Notebook 07's helpers: `full_tensor`, which its students call on whatever torch they have (before
2.13, torch's own `DTensor.full_tensor` fails on Gloo, and `gather_rows` does its work); the rule
the checks hold `fully_shard`'s traffic to, against torch itself, in fp32 and in mixed precision;
what a ZeRO rank's kept storages say about its mistake; what the ZeRO-2 and FSDP checks watch during
backward."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from autograder.sharded_data_parallel import (
    fully_shard_bytes_reference,
    fully_shard_memory_reference,
    fully_shard_traffic_reference,
    measure_fully_shard_memory,
    measure_fully_shard_step,
)
from autograder.sharded_data_parallel.buckets import PeakBytes, gradients_loss
from autograder.sharded_data_parallel.prefetch import expect_prefetch
from autograder.sharded_data_parallel.zero import _kept_hint
from autograder.torch_compat import full_tensor, gather_rows
from launcher import launch


def whole_parameters(rank: int, world_size: int) -> list[tuple[list, list]]:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 5), nn.Linear(5, 2))  # 5 and 2 rows: uneven over 3 ranks
    fully_shard(model, mesh=init_device_mesh("cpu", (world_size,)))
    return [(gather_rows(p).tolist(), full_tensor(p).tolist()) for p in model.parameters()]


def test_the_fallback_for_older_torch_gathers_what_full_tensor_does() -> None:
    torch.manual_seed(0)
    expected = [p.tolist() for p in nn.Sequential(nn.Linear(3, 5), nn.Linear(5, 2)).parameters()]
    for rank_result in launch(whole_parameters, 3, backend="gloo"):
        for (by_rows, by_helper), whole in zip(rank_result, expected, strict=True):
            assert by_rows == by_helper == whole


def test_a_whole_tensor_is_returned_as_it_is() -> None:
    t = torch.ones(2)
    assert full_tensor(t) is t


def fully_shard_step_traffic(rank: int, world_size: int, layers: list, reshard: bool) -> dict:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from autograder import CommLog

    torch.manual_seed(0)
    model = nn.Sequential(*(nn.Linear(i, o) for o, i in layers))
    mesh = init_device_mesh("cpu", (world_size,))
    for layer in model:
        fully_shard(layer, mesh=mesh, reshard_after_forward=reshard)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
    with CommLog(count_collectives=False) as log:
        model(torch.randn(5, layers[0][1])).square().mean().backward()
    traffic = {"all_gather": (0, 0), "reduce_scatter": (0, 0)}
    for call in log.calls:
        calls, elements = traffic[call.name]
        whole = call.contributed * world_size if call.name == "all_gather" else call.contributed
        traffic[call.name] = (calls + 1, elements + whole)
    return traffic


@pytest.mark.parametrize("world_size", [1, 3, 4])
@pytest.mark.parametrize("reshard", [True, False])
def test_the_traffic_rule_is_what_fully_shard_sends(world_size: int, reshard: bool) -> None:
    layers = [
        (6, 3),
        (2, 6),
        (5, 2),
    ]  # (out, in): rows that do not divide, a layer with fewer rows than ranks
    expected = fully_shard_traffic_reference(layers, world_size, reshard)
    for traffic in launch(fully_shard_step_traffic, world_size, layers, reshard, backend="gloo"):
        assert traffic == expected


def test_the_kept_storages_name_the_mistake() -> None:
    shapes = [(4, 3), (4,)]
    moments_of_everything = [48, 48, 16, 16, 40]
    assert "two moments for every parameter" in _kept_hint(moments_of_everything, shapes, 16)
    whole_master_copy = [64, 32, 32]
    hint = _kept_hint(whole_master_copy, shapes, 16)
    assert "whole flat copy" in hint and "two moments" not in hint
    whole_parameters_and_gradients = [64, 64, 32, 32]  # moments sharded, two whole flat copies kept
    hint = _kept_hint(whole_parameters_and_gradients, shapes, 16)
    assert "whole flat copies" in hint and "two moments" not in hint


@pytest.mark.parametrize("world_size", [1, 3])
@pytest.mark.parametrize("reshard", [True, False])
def test_the_mixed_precision_rule_is_what_fully_shard_sends_and_keeps(world_size: int, reshard: bool) -> None:
    layers = [(6, 3), (2, 6), (5, 2)]
    expected = fully_shard_bytes_reference(layers, world_size, reshard)
    for measured in launch(measure_fully_shard_step, world_size, layers, reshard, backend="gloo"):
        assert measured == expected


@pytest.mark.parametrize(
    ("world_size", "reshard", "sync"),
    [(3, True, True), (3, False, False), (2, True, False), (1, False, True)],
)
def test_the_memory_model_is_what_fully_shard_keeps(world_size: int, reshard: bool, sync: bool) -> None:
    """What lasts between steps and what a micro-batch leaves are exact on rank 0 (the others hold
    fewer rows of some parameters, so less); the step's peak is above the model's floor."""
    layers = [(6, 3), (2, 6), (5, 2)]  # rows that do not divide by 2 or 3
    expected = fully_shard_memory_reference(layers, world_size, reshard, sync)
    measured = launch(measure_fully_shard_memory, world_size, layers, reshard, sync, backend="gloo")
    assert measured[0]["states"] == expected["states"]
    assert measured[0]["gradients"] == expected["gradients"]
    for rank_measured in measured:
        assert rank_measured["states"] <= expected["states"]
        assert rank_measured["peak"] >= rank_measured["states"] + rank_measured["gradients"]
    assert measured[0]["peak"] >= sum(expected.values())


def test_the_gradients_loss_gives_each_parameter_its_gradient_last_first() -> None:
    params = [torch.zeros(3, requires_grad=True) for _ in range(4)]
    grads = [torch.full((3,), float(i)) for i in range(4)]
    order = []
    for i, p in enumerate(params):
        p.register_post_accumulate_grad_hook(lambda p, i=i: order.append(i))
    gradients_loss(params, grads).backward()
    assert order == [3, 2, 1, 0]
    assert all(torch.equal(p.grad, g) for p, g in zip(params, grads, strict=True))


def test_the_peak_counts_what_is_alive_at_once() -> None:
    peak = PeakBytes()
    with peak:
        a = torch.zeros(100)  # 400 bytes
        b = torch.zeros(50)  # 600 at once
        del a
        c = torch.zeros(10)  # 240
    assert peak.peak == 600 and b.numel() + c.numel() == 60


def test_a_prefetch_is_started_before_the_layer_computes_and_waited_after() -> None:
    forward = [("gather", 0), ("wait", 0), ("gather", 1), ("compute", 0), ("wait", 1), ("compute", 1)]
    backward = [("gather", 2), ("wait", 2), ("gather", 3), ("compute", 1), ("wait", 3), ("compute", 0)]
    expect_prefetch("model", 1, forward + backward, len(forward), 2)
    blocking = [("gather", 0), ("wait", 0), ("gather", 1), ("wait", 1), ("compute", 0), ("compute", 1)]
    with pytest.raises(AssertionError, match="waited on"):
        expect_prefetch("model", 1, blocking + backward, len(blocking), 2)
    late = [("gather", 0), ("wait", 0), ("compute", 0), ("gather", 1), ("wait", 1), ("compute", 1)]
    with pytest.raises(AssertionError, match="before layer 1's all_gather started"):
        expect_prefetch("model", 1, late + backward, len(late), 2)


def test_a_prefetch_started_before_the_layers_own_all_gather_is_still_a_prefetch() -> None:
    # Layer 0 starts layer 1's all_gather (g0) before its own (g1), waits on its own, computes;
    # backward alike. Which layer each all_gather brought is read from its data.
    forward = [("gather", 0), ("gather", 1), ("wait", 1), ("compute", 0), ("wait", 0), ("compute", 1)]
    backward = [("gather", 2), ("gather", 3), ("wait", 3), ("compute", 1), ("wait", 2), ("compute", 0)]
    layers_of = {0: [1], 1: [0], 2: [0], 3: [1]}
    expect_prefetch("model", 1, forward + backward, len(forward), 2, layers_of)
    # Taken by their order alone, the all_gathers would be misread as a blocking prefetch.
    with pytest.raises(AssertionError, match="waited on"):
        expect_prefetch("model", 1, forward + backward, len(forward), 2)
    # Read from the data, a layer that computes before the next one's all_gather starts still fails.
    late = [("gather", 0), ("wait", 0), ("compute", 0), ("gather", 1), ("wait", 1), ("compute", 1)]
    with pytest.raises(AssertionError, match="before layer 1's all_gather started"):
        expect_prefetch("model", 1, late + backward, len(late), 2, {0: [0], 1: [1], 2: [0], 3: [1]})
