"""Joins the gathered slices along the batch, not the features.

replaces: allgather
fails: test_allgather test_allgather_more
says: stacked along the rows (the batch)
"""

import torch
import torch.distributed as dist


class AllGatherFeatures(AllGatherFeatures):  # noqa: F821 - the solution's, then changed
    @staticmethod
    def forward(ctx, local):
        pieces = [torch.empty_like(local) for _ in range(dist.get_world_size())]
        dist.all_gather(pieces, local.contiguous())
        return torch.cat(pieces, dim=0)
