"""What torch's collectives do, run as the references every check compares against."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from launcher import get_device

from ..torch_compat import reduce_scatter_single
from .cases import _launch

ROOTED = ("broadcast", "reduce", "gather", "scatter")
SPLITTING = ("scatter", "reduce_scatter", "all_to_all")
COLLECTIVES = (
    "broadcast",
    "reduce",
    "all_reduce",
    "gather",
    "all_gather",
    "scatter",
    "reduce_scatter",
    "all_to_all",
)


def collective_inputs(
    name: str,
    world_size: int,
    seed: int | None = None,
    dtype: torch.dtype = torch.int64,
    per_rank: int | None = None,
) -> list[torch.Tensor]:
    """One input per rank. Without a seed, rank r holds [10r, 10r+1, ...], easy to follow by eye.

    Collectives that split a tensor into one chunk per rank get a multiple of world_size elements:
    ``per_rank`` chunks' elements per rank (without it, 2 without a seed, else drawn from the
    seed); with a seed, the other lengths and the values are random.
    """
    if seed is None:
        length = (per_rank or 2) * world_size if name in SPLITTING else 4
        return [(torch.arange(length) + 10 * rank).to(dtype) for rank in range(world_size)]
    generator = torch.Generator().manual_seed(seed)
    drawn = int(torch.randint(1, 4, (1,), generator=generator))
    per_rank = per_rank or drawn
    length = (
        per_rank * world_size if name in SPLITTING else int(torch.randint(1, 7, (1,), generator=generator))
    )
    if dtype.is_floating_point:
        return [torch.randn(length, generator=generator).to(dtype) for _ in range(world_size)]
    return [torch.randint(0, 100, (length,), generator=generator).to(dtype) for _ in range(world_size)]


def run_collective(rank: int, world_size: int, name: str, inputs: list[torch.Tensor], root: int = 0) -> Any:
    """Inside a rank: run torch's collective on this rank's input; return what the rank holds.

    Ranks that receive nothing (all but the root of a reduce or a gather) return None. The
    tensors go on the rank's device, so this runs under NCCL as well as Gloo.
    """
    t = inputs[rank].to(get_device(), copy=True)
    n = world_size
    if name == "broadcast":
        dist.broadcast(t, src=root)
        return t
    if name == "reduce":
        dist.reduce(t, dst=root)
        return t if rank == root else None
    if name == "all_reduce":
        dist.all_reduce(t)
        return t
    if name == "gather":
        pieces = [torch.empty_like(t) for _ in range(n)] if rank == root else None
        dist.gather(t, pieces, dst=root)
        return torch.cat(pieces) if rank == root else None
    if name == "all_gather":
        pieces = [torch.empty_like(t) for _ in range(n)]
        dist.all_gather(pieces, t)
        return torch.cat(pieces)
    if name == "scatter":
        out = torch.empty(t.numel() // n, dtype=t.dtype, device=t.device)
        dist.scatter(out, list(t.chunk(n)) if rank == root else None, src=root)
        return out
    if name == "reduce_scatter":
        out = torch.empty(t.numel() // n, dtype=t.dtype, device=t.device)
        reduce_scatter_single(out, t)
        return out
    if name == "all_to_all":
        out = torch.empty_like(t)
        dist.all_to_all_single(out, t)
        return out
    raise ValueError(f"unknown collective {name!r}; choose from {', '.join(COLLECTIVES)}")


def _run_cases(rank: int, world_size: int, cases: list[tuple[str, list[torch.Tensor], int]]) -> list[Any]:
    return [run_collective(rank, world_size, name, inputs, root) for name, inputs, root in cases]


def real_outputs(cases: list[tuple[str, list[torch.Tensor], int]], world_size: int) -> list[list[Any]]:
    """Run every (collective, inputs, root) case on ``world_size`` ranks: [case][rank] -> output."""
    # Without torch's checks that every rank calls the same collective: these calls are the
    # course's own, alike on every rank, and the checks would double their time.
    per_rank = _launch(_run_cases, world_size, cases, what="torch's collectives", check_collectives=False)
    return [[per_rank[rank][i] for rank in range(world_size)] for i in range(len(cases))]
