"""Notebook 07's `full_tensor`, which its students call on whatever torch they have (before
2.13, torch's own `DTensor.full_tensor` fails on Gloo, and `gather_rows` does its work)."""

from __future__ import annotations

import torch
from torch import nn

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
