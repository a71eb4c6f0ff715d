"""Counts the whole parameters left after forward as the padded fp32 buffer the all_gather filled.

replaces: fsdp_bytes
fails: test_fsdp_bytes test_fsdp_bytes_more
says: count the padded parameters in fp32
"""


def fully_shard_bytes(layers, world_size, reshard_after_forward):
    traffic = fully_shard_traffic(layers, world_size, reshard_after_forward)  # noqa: F821
    padded = sum(-(-o // world_size) * world_size * (i + 1) for o, i in layers)
    return {
        "all_gather": 2 * traffic["all_gather"][1],
        "reduce_scatter": 4 * traffic["reduce_scatter"][1],
        "whole_after_forward": 0 if reshard_after_forward else 4 * padded,
    }
