"""Exercise 3's check: the zig-zag layout (rank i holds chunks i and 2 CP - 1 - i of 2 CP) and the
inverse of a split, putting every rank's rows back at their positions."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..checks import expect_equal, expect_tensor, fail
from .layouts import (
    chunk_bounds,
    contiguous_layout,
    reference_zigzag_layout,
    take,
)


def zigzag_cases(hidden: bool) -> list[tuple[int, int]]:
    if not hidden:
        return [(8, 2), (12, 3)]
    return [(2, 1), (5, 1), (7, 2), (9, 3), (10, 4), (16, 4), (17, 4), (30, 3)]


def _plain(value: object) -> object:
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return int(value) if type(value) is not bool and hasattr(value, "__index__") else value


def _layout_mistakes(seq_len: int, world_size: int) -> dict[str, object]:
    n = 2 * world_size
    chunks = chunk_bounds(seq_len, n)
    size = -(-seq_len // n)
    ceil_chunks = [(min(c * size, seq_len), min((c + 1) * size, seq_len)) for c in range(n)]
    return {
        "split the sequence in world_size contiguous spans: the last rank then has the most "
        "causal work": _plain(contiguous_layout(seq_len, world_size)),
        "pair chunk i with chunk i + world_size: both of rank i's chunks must balance, an early "
        "one with a late one, i with 2 world_size - 1 - i": [
            [list(chunks[i]), list(chunks[i + world_size])] for i in range(world_size)
        ],
        "cut chunks of the rounded-up length, leaving the last ones short: make the first "
        "seq_len % (2 world_size) chunks one longer, as torch.tensor_split does": [
            [list(ceil_chunks[i]), list(ceil_chunks[n - 1 - i])] for i in range(world_size)
        ],
        "give rank i its late chunk first: keep each rank's spans in the order of their positions": [
            [list(chunks[n - 1 - i]), list(chunks[i])] for i in range(world_size)
        ],
    }


def check_zigzag(zigzag_layout: Callable, unshard: Callable, hidden: bool = False) -> None:
    """The layout for each (seq_len, world_size), and ``unshard`` undoing ``take`` under it and under
    the contiguous layout."""
    __tracebackhide__ = True
    for seq_len, world_size in zigzag_cases(hidden):
        expected = _plain(reference_zigzag_layout(seq_len, world_size))
        got = zigzag_layout(seq_len, world_size)
        expect_equal(
            _plain(got),
            expected,
            f"zigzag_layout({seq_len}, {world_size})",
            mistakes=_layout_mistakes(seq_len, world_size),
        )
        gen = torch.Generator().manual_seed(seq_len * 10 + world_size)
        whole = torch.randn(2, seq_len, 3, generator=gen)
        for name, layout in (
            ("zig-zag", reference_zigzag_layout(seq_len, world_size)),
            ("contiguous", contiguous_layout(seq_len, world_size)),
        ):
            shards = [take(whole, spans) for spans in layout]
            copies = [s.clone() for s in shards]
            result = unshard(shards, layout)
            what = f"unshard of the {name} split of {seq_len} tokens over {world_size} ranks"
            if any(not torch.equal(a, b) for a, b in zip(shards, copies, strict=True)):
                fail(f"{what} changed the shards it was given: build a new tensor.")
            expect_tensor(
                result,
                whole,
                what,
                mistakes={
                    "concatenate the shards in rank order: rows go back to their positions": torch.cat(
                        shards, dim=-2
                    )
                }
                if len(shards) > 1
                else None,
            )
