"""Nests the axes in the order the dict lists them: right only when it lists dp, pp, tp.

replaces: mesh
fails: test_mesh_more
says: nesting the axes in the order the dict lists them
"""

import itertools


def mesh_coords(rank, sizes):
    coords = {}
    for axis in reversed(list(sizes)):
        coords[axis] = rank % sizes[axis]
        rank //= sizes[axis]
    return coords


def mesh_rank(coords, sizes):
    rank = 0
    for axis in sizes:
        rank = rank * sizes[axis] + coords[axis]
    return rank


def axis_groups(sizes, axis):
    others = [a for a in sizes if a != axis]
    groups = []
    for fixed in itertools.product(*(range(sizes[a]) for a in others)):
        coords = dict(zip(others, fixed, strict=True))
        groups.append([mesh_rank({**coords, axis: i}, sizes) for i in range(sizes[axis])])
    return sorted(groups)
