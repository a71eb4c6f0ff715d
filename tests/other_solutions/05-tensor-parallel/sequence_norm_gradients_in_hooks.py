"""All-reduces the LayerNorm's gradients from hooks during the backward pass (nothing is left for
reduce_norm_gradients), keeps the shards as plain Parameters, and gathers with torch's list forms.

replaces: sequence
fails: none
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


class GatherTokens(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        pieces = [torch.empty_like(x) for _ in range(dist.get_world_size())]
        dist.all_gather(pieces, x.contiguous())
        return torch.cat(pieces)

    @staticmethod
    def backward(ctx, grad):
        parts = [part.contiguous() for part in grad.chunk(dist.get_world_size())]
        mine = torch.empty_like(parts[0])
        dist.reduce_scatter(mine, parts)
        return mine


class ScatterTokens(torch.autograd.Function):
    @staticmethod
    def forward(ctx, partial):
        return GatherTokens.backward(ctx, partial)

    @staticmethod
    def backward(ctx, grad):
        return GatherTokens.forward(ctx, grad)


class SequenceParallelBlock(nn.Module):
    def __init__(self, norm, fc1, fc2, rank, world_size):
        super().__init__()
        self.norm = nn.LayerNorm(norm.normalized_shape)
        self.norm.load_state_dict(norm.state_dict())
        self.fc1 = nn.Module()
        self.fc2 = nn.Module()
        self.fc1.weight = nn.Parameter(fc1.weight.detach().chunk(world_size)[rank].clone())
        self.fc2.weight = nn.Parameter(fc2.weight.detach().chunk(world_size, dim=1)[rank].clone())
        for parameter in self.norm.parameters():
            parameter.register_post_accumulate_grad_hook(lambda p: dist.all_reduce(p.grad))

    def forward(self, x):
        h = F.gelu(GatherTokens.apply(self.norm(x)) @ self.fc1.weight.T)
        return ScatterTokens.apply(h @ self.fc2.weight.T) + x

    def reduce_norm_gradients(self):
        pass  # done during backward
