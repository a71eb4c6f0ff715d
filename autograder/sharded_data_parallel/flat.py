"""Check of notebook 07's flat shards: tensors of any sizes laid end to end, padded, and cut into
equal shards; the pieces of tensors each rank's shard holds."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..checks import expect_equal, fail

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
