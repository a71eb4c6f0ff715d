"""Finds the padded rows from the largest piece torch.chunk gives a rank, and returns lists.

replaces: fsdp_traffic
fails: none
"""

import torch


def fully_shard_traffic(layers, world_size, reshard_after_forward):
    if world_size < 2:
        return {"all_gather": [0, 0], "reduce_scatter": [0, 0]}
    elements = 0
    for out_features, in_features in layers:
        piece = max(len(c) for c in torch.arange(out_features).chunk(world_size))  # each rank's padded rows
        elements += piece * world_size * in_features + piece * world_size
    times = 1 + bool(reshard_after_forward)
    return {
        "all_gather": [times * len(layers), times * elements],
        "reduce_scatter": [len(layers), elements],
    }
