"""Lays the ranks out as torch's DeviceMesh does: an arange reshaped to (dp, pp, tp); a group is
a line of it along one axis.

replaces: mesh
fails: none
"""

import torch

AXES = ("dp", "pp", "tp")


def _grid(sizes):
    return torch.arange(sizes["dp"] * sizes["pp"] * sizes["tp"]).reshape([sizes[a] for a in AXES])


def mesh_coords(rank, sizes):
    where = (_grid(sizes) == rank).nonzero()[0].tolist()
    return dict(zip(AXES, where, strict=True))


def mesh_rank(coords, sizes):
    return int(_grid(sizes)[tuple(coords[a] for a in AXES)])


def axis_groups(sizes, axis):
    grid = _grid(sizes).movedim(AXES.index(axis), -1)
    return sorted(tuple(line) for line in grid.reshape(-1, sizes[axis]).tolist())
