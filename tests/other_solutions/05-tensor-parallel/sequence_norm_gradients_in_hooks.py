"""All-reduces the LayerNorm's gradients from hooks during the backward pass (nothing is left for
reduce_norm_gradients), keeps the shards as plain Parameters, gathers with torch's list forms, and
gathers fc1's input again in the backward pass without overlapping it.

replaces: sequence
fails: none
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


def gather(x):
    pieces = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(pieces, x.contiguous())
    return torch.cat(pieces)


def scatter(x):
    parts = [part.contiguous() for part in x.chunk(dist.get_world_size())]
    mine = torch.empty_like(parts[0])
    dist.reduce_scatter(mine, parts)
    return mine


class ShardedInputLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight):
        ctx.save_for_backward(x, weight)
        return gather(x) @ weight.T

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        return scatter(grad @ weight), grad.T @ gather(x)


class ScatterTokens(torch.autograd.Function):
    @staticmethod
    def forward(ctx, partial):
        return scatter(partial)

    @staticmethod
    def backward(ctx, grad):
        return gather(grad)


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
        h = F.gelu(ShardedInputLinear.apply(self.norm(x), self.fc1.weight))
        return ScatterTokens.apply(h @ self.fc2.weight.T) + x

    def reduce_norm_gradients(self):
        pass  # done during backward
