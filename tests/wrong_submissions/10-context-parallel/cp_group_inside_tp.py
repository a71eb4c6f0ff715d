"""Puts CP innermost, its ranks consecutive: they take TP's place on NVLink.

replaces: cp_plan
fails: test_cp_plan test_cp_plan_more
says: put CP inside TP
"""


def cp_group(rank, sizes):
    first = rank - rank % sizes["cp"]
    return [first + i for i in range(sizes["cp"])]
