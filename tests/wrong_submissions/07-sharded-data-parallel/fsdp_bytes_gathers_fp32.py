"""Counts the all_gathers in fp32, as if each shard were gathered before its cast to bf16.

replaces: fsdp_bytes
fails: test_fsdp_bytes test_fsdp_bytes_more
says: gather the fp32 parameters
"""


def fully_shard_bytes(layers, world_size, reshard_after_forward):
    traffic = fully_shard_traffic(layers, world_size, reshard_after_forward)  # noqa: F821
    return {
        "all_gather": 4 * traffic["all_gather"][1],
        "reduce_scatter": 4 * traffic["reduce_scatter"][1],
        "whole_after_forward": 0 if reshard_after_forward else 2 * sum(o * (i + 1) for o, i in layers),
    }
