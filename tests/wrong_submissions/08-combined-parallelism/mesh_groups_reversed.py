"""Lists each group's ranks from the highest down: position i is no longer coordinate i.

replaces: mesh
fails: test_mesh test_mesh_more
says: a group lists its ranks out of order
"""

_right_groups = axis_groups  # noqa: F821 - the solution's, defined before this


def axis_groups(sizes, axis):
    return [sorted(group, reverse=True) for group in _right_groups(sizes, axis)]
