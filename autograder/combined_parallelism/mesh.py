"""Notebook 08's check of the rank layout: coordinates on a mesh of named axes, TP innermost,
and the members of every group of every axis."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

from ..checks import expect_equal, fail

# Outermost first: data parallelism, then pipeline stages, then tensor parallelism innermost.
ORDER = ("dp", "pp", "tp")


def reference_coords(rank: int, sizes: dict[str, int]) -> dict[str, int]:
    coords = {}
    for axis in reversed(ORDER):  # the innermost axis varies fastest
        coords[axis] = rank % sizes[axis]
        rank //= sizes[axis]
    return {axis: coords[axis] for axis in ORDER}


def reference_groups(sizes: dict[str, int], axis: str) -> list[list[int]]:
    world = math.prod(sizes.values())
    groups: dict[tuple, list[int]] = {}
    for rank in range(world):
        coords = reference_coords(rank, sizes)
        key = tuple(coords[a] for a in ORDER if a != axis)
        groups.setdefault(key, []).append(rank)
    return sorted(groups.values())


def _digits(rank: int, sizes: dict[str, int], order: tuple[str, ...]) -> list[int]:
    """Rank's digits in the mixed radix of ``order`` (outermost first)."""
    digits = []
    for axis in reversed(order):
        digits.append(rank % sizes[axis])
        rank //= sizes[axis]
    return digits[::-1]


def _plain(value: object) -> object:
    """Lists for tuples and ints for int-like numbers, so that a tuple of groups is accepted."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return int(value) if type(value) is not bool and hasattr(value, "__index__") else value


def _mistakes(sizes: dict[str, int], axis: str) -> dict[str, object]:
    """What the typical wrong layouts give for this axis's groups."""
    found: dict[str, object] = {}
    for order, mistake in (
        (("tp", "pp", "dp"), "put tensor parallelism outermost (its ranks far apart, across nodes)"),
        (tuple(sizes), "nest the axes in the order the dictionary lists them, not dp, pp, tp"),
    ):
        if order == ORDER:
            continue
        world = math.prod(sizes.values())
        groups: dict[tuple, list[int]] = {}
        for rank in range(world):
            rest, coords = rank, {}
            for a in reversed(order):
                coords[a] = rest % sizes[a]
                rest //= sizes[a]
            groups.setdefault(tuple(coords[a] for a in order if a != axis), []).append(rank)
        found.setdefault(mistake, sorted(groups.values()))
    return found


def check_mesh_layout(
    mesh_coords: Callable, mesh_rank: Callable, axis_groups: Callable, cases: list[dict[str, int]]
) -> None:
    """For each mesh in ``cases`` (axis name -> size, in any order), check every rank's
    coordinates, the rank back from them, and every axis's groups."""
    __tracebackhide__ = True
    for sizes in cases:
        world = math.prod(sizes.values())
        shown = ", ".join(f"{a}={sizes[a]}" for a in sizes)
        for rank in range(world):
            expected = reference_coords(rank, sizes)
            got = mesh_coords(rank, dict(sizes))
            if type(got) is not dict or set(got) != set(ORDER):
                fail(
                    f"mesh_coords({rank}, {{{shown}}}) returned {got!r}: it should return a dict "
                    f"with one coordinate for each of {', '.join(ORDER)}, even an axis of size 1."
                )
            outermost = dict(zip(("tp", "pp", "dp"), _digits(rank, sizes, ("tp", "pp", "dp")), strict=True))
            tp_outermost = "put tensor parallelism outermost (TP must vary fastest, inside a node)"
            listed = tuple(sizes)
            if listed == ("tp", "pp", "dp"):
                tp_outermost += ", as nesting the axes in the order the dict lists them does"
            mistakes = {tp_outermost: outermost}
            if listed not in (ORDER, ("tp", "pp", "dp")):
                mistakes[
                    f"nest the axes in the order the dict lists them ({', '.join(listed)}), not dp, pp, tp"
                ] = dict(zip(listed, _digits(rank, sizes, listed), strict=True))
            expect_equal(_plain(got), expected, f"mesh_coords({rank}, {{{shown}}})", mistakes=mistakes)
            back = mesh_rank(dict(expected), dict(sizes))
            expect_equal(_plain(back), rank, f"mesh_rank({expected}, {{{shown}}})")
        for axis in ORDER:
            expected_groups = reference_groups(sizes, axis)
            got = _plain(axis_groups(dict(sizes), axis))
            if not isinstance(got, list) or not all(isinstance(g, list) for g in got):
                fail(
                    f"axis_groups({{{shown}}}, {axis!r}) should return a list of lists of ranks, got {got!r}"
                )
            if sorted(got) == expected_groups and got != expected_groups:
                fail(
                    f"axis_groups({{{shown}}}, {axis!r}) has the right groups, listed in another order: "
                    "list the groups by their first rank, and each group's ranks in the order of their "
                    f"{axis} coordinate."
                )
            if sorted(map(sorted, got)) == expected_groups and got != expected_groups:
                fail(
                    f"axis_groups({{{shown}}}, {axis!r}): a group lists its ranks out of order. A group's "
                    f"ranks go in the order of their {axis} coordinate: the rank at position i of the list "
                    "is the one with coordinate i (new_group and DeviceMesh number a group's ranks that way)."
                )
            expect_equal(
                got, expected_groups, f"axis_groups({{{shown}}}, {axis!r})", mistakes=_mistakes(sizes, axis)
            )


def mesh_cases(hidden: bool) -> list[dict[str, int]]:
    """The meshes a test uses: a few shown, more (odd sizes, other key orders) when graded."""
    if not hidden:
        return [{"dp": 2, "pp": 1, "tp": 2}, {"dp": 2, "pp": 2, "tp": 2}]
    cases = [{"tp": 4, "pp": 2, "dp": 3}, {"pp": 3, "dp": 2, "tp": 2}, {"dp": 1, "pp": 1, "tp": 1}]
    cases += [
        dict(zip(("pp", "tp", "dp"), s, strict=True)) for s in itertools.product((1, 2, 3), (1, 2), (5,))
    ]
    return cases
