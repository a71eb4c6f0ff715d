"""Counts every unit as whole when forward returns, even when each was resharded after its forward.

replaces: fsdp_bytes
fails: test_fsdp_bytes_more
says: count the units as resharded when they stay whole
"""


def fully_shard_bytes(layers, world_size, reshard_after_forward):
    traffic = fully_shard_traffic(layers, world_size, reshard_after_forward)  # noqa: F821
    return {
        "all_gather": 2 * traffic["all_gather"][1],
        "reduce_scatter": 4 * traffic["reduce_scatter"][1],
        "whole_after_forward": 2 * sum(o * (i + 1) for o, i in layers),
    }
