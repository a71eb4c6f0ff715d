"""Numbers the ranks with tensor parallelism outermost: a TP group's ranks far apart, in other nodes.

replaces: mesh
fails: test_mesh test_mesh_more
says: put tensor parallelism outermost
"""

import itertools


def mesh_coords(rank, sizes):
    coords = {}
    for axis in ("dp", "pp", "tp"):
        coords[axis] = rank % sizes[axis]
        rank //= sizes[axis]
    return coords


def mesh_rank(coords, sizes):
    rank = 0
    for axis in ("tp", "pp", "dp"):
        rank = rank * sizes[axis] + coords[axis]
    return rank


def axis_groups(sizes, axis):
    others = [a for a in ("dp", "pp", "tp") if a != axis]
    groups = []
    for fixed in itertools.product(*(range(sizes[a]) for a in others)):
        coords = dict(zip(others, fixed, strict=True))
        groups.append([mesh_rank({**coords, axis: i}, sizes) for i in range(sizes[axis])])
    return sorted(groups)
