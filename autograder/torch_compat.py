"""The torch-version workarounds that notebooks and checks share, kept in one place.

The course supports torch 2.8 and later. Measured with 2.8: Gloo's reduce_scatter sums where it
is asked for ``ReduceOp.AVG`` (so FSDP2's gradients came out n times too large), and Gloo has no
coalesced all_gather, which ``DTensor.full_tensor()`` needs; `fully_shard` and `full_tensor` work
around both. torch 2.13 does both, and renames two collectives: `all_gather_single` and
`reduce_scatter_single` are its names for ``all_gather_into_tensor`` and ``reduce_scatter_tensor``
(older torch has only the old names, which 2.13 runs with a FutureWarning). From 2.13 on, every
name here does what torch's own does.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

__all__ = [
    "OLD_GLOO",
    "all_gather_single",
    "full_tensor",
    "fully_shard",
    "gather_rows",
    "reduce_scatter_single",
]

# Gloo before torch 2.13 (measured with 2.8): its reduce_scatter sums where it is asked for
# ReduceOp.AVG, and it has no allgather_into_tensor_coalesced, which DTensor.full_tensor needs.
# 2.13 does both. (What is done about it below is right on any version.)
OLD_GLOO = torch.torch_version.TorchVersion(torch.__version__) < "2.13"

# torch 2.13's names; older torch has only the old ones, which 2.13 runs with a FutureWarning.
all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
reduce_scatter_single = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

_type = type


def fully_shard(module: nn.Module, **kwargs: Any) -> nn.Module:
    """``torch.distributed.fsdp.fully_shard(module, **kwargs)``, which on Gloo before torch 2.13
    would sum the gradients it must average (FSDP2 asks the reduce_scatter for ReduceOp.AVG):
    there, the reduce_scatter sums and FSDP divides afterwards."""
    from torch.distributed.fsdp import fully_shard as torch_fully_shard

    sharded = torch_fully_shard(module, **kwargs)
    if OLD_GLOO and dist.get_backend() == "gloo":
        sharded.set_force_sum_reduction_for_comms(True)
    return sharded


def full_tensor(param: torch.Tensor) -> torch.Tensor:
    """The whole of a parameter that ``fully_shard`` cut into rows (a ``DTensor``), on every
    rank: ``param.full_tensor()``, or on Gloo before torch 2.13, which cannot run that, the
    same gathered by `gather_rows`."""
    from torch.distributed.tensor import DTensor, Shard

    if _type(param) is not DTensor:
        return param
    if not (OLD_GLOO and param.device.type == "cpu"):
        return param.full_tensor()
    if tuple(param.placements) == (Shard(0),):
        return gather_rows(param)
    return gather_pieces(param)


def gather_pieces(param: torch.Tensor) -> torch.Tensor:
    """A ``DTensor`` with any placements (a 2-D mesh's, say) made whole on every rank: each rank's
    piece, and where it lies in the whole, gathered along one mesh dimension after the other with
    ``all_gather_object``, which Gloo before torch 2.13 runs (each on that dimension's group)."""
    from torch.distributed.tensor._utils import compute_local_shape_and_global_offset

    mesh = param.device_mesh
    local = param.to_local().detach().contiguous()
    shape, offset = compute_local_shape_and_global_offset(param.shape, mesh, param.placements)
    pieces = [(tuple(shape), tuple(offset), local)]
    for dim in range(mesh.ndim):
        group = mesh.get_group(dim)
        gathered: list = [None] * dist.get_world_size(group)
        dist.all_gather_object(gathered, pieces, group=group)
        pieces = [piece for part in gathered for piece in part]
    whole = local.new_empty(param.shape)
    for shape, offset, data in pieces:
        whole[tuple(slice(start, start + size) for start, size in zip(offset, shape, strict=True))] = data
    return whole


def gather_rows(param: torch.Tensor) -> torch.Tensor:
    """A ``DTensor`` sharded by rows, made whole on every rank with the list form of all_gather,
    each rank's rows padded to ``torch.chunk``'s size (the last ranks may hold fewer, or none)."""
    group = param.device_mesh.get_group()
    world_size = dist.get_world_size(group)
    rows = param.shape[0]
    local = param.to_local().detach()
    padded = local.new_zeros((math.ceil(rows / world_size), *local.shape[1:]))
    padded[: local.shape[0]] = local
    pieces = [torch.empty_like(padded) for _ in range(world_size)]
    dist.all_gather(pieces, padded, group=group)
    return torch.cat(pieces)[:rows]
