"""Leaves out the axes of size 1 from the coordinates.

replaces: mesh
fails: test_mesh test_mesh_more
says: even an axis of size 1
"""

_right_coords = mesh_coords  # noqa: F821 - the solution's, defined before this


def mesh_coords(rank, sizes):
    return {axis: c for axis, c in _right_coords(rank, sizes).items() if sizes[axis] > 1}
