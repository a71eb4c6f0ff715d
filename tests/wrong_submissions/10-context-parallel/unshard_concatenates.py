"""Concatenates the shards in rank order, which is the sequence only for the contiguous split.

replaces: zigzag
fails: test_zigzag test_zigzag_more
says: concatenate the shards in rank order
"""

import torch


def unshard(shards, layout):
    return torch.cat(shards, dim=-2)
