"""Nests CP outside the pipeline stages, [TP, PP, CP, DP].

replaces: cp_plan
fails: test_cp_plan test_cp_plan_more
says: put CP outside PP
"""


def cp_group(rank, sizes):
    stride = sizes["tp"] * sizes["pp"]
    coordinate = rank // stride % sizes["cp"]
    first = rank - coordinate * stride
    return [first + i * stride for i in range(sizes["cp"])]
