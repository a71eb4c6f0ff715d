"""What notebook 05's checks share: the layers' sizes, the inputs every rank holds by design,
a rank's shards of Megatron's two layers, and the checks of what a rank returned and sent."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from ..checks import expect_floats, fail

DIM, HIDDEN = 12, 48  # divisible by 1, 2, 3 and 4
_type = type  # the checks compare types with what they captured here, not what a cell rebinds


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


def _storage(module: Any) -> list[tuple[str, int, int]]:
    """Inside a rank: each parameter of ``module``, the bytes it needs, and the bytes of the storage
    it keeps alive (a slice of a tensor is a view that keeps the whole tensor's storage)."""
    if not isinstance(module, nn.Module):
        return []
    return [
        (name, p.numel() * p.element_size(), p.untyped_storage().nbytes())
        for name, p in module.named_parameters()
    ]


def _expect_own_storage(what: str, stored: list[tuple[str, int, int]], shard_bytes: int) -> None:
    """The parameters a rank keeps must hold its shards, and nothing larger: a view of the whole
    weight keeps all of it alive on every rank, world_size times the memory of the shard."""
    __tracebackhide__ = True
    for name, needs, keeps in stored:
        if keeps > needs:
            fail(
                f"{what}: .{name} holds {needs} bytes but keeps alive a storage of {keeps} bytes. It is a "
                "view into the whole layer's weight (a slice shares its tensor's storage), so every rank "
                "still holds the whole matrix: copy the shard into a tensor of its own."
            )
    total = sum(needs for _, needs, _ in stored)
    if total > shard_bytes:
        fail(
            f"{what}: its parameters hold {total} bytes; this rank's shard is {shard_bytes}. Keep only "
            "this rank's share of the layer (not the whole nn.Linear, nor a copy of it)."
        )


def _column_shard(world_size: int, mine: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's rows of fc1 (DIM -> HIDDEN) and entries of its bias."""
    n = HIDDEN // world_size
    return torch.randn(n, DIM, generator=mine) / math.sqrt(DIM), torch.randn(n, generator=mine)


def _row_shard(world_size: int, mine: torch.Generator) -> torch.Tensor:
    """This rank's columns of fc2 (HIDDEN -> DIM)."""
    return torch.randn(DIM, HIDDEN // world_size, generator=mine) / math.sqrt(HIDDEN)
