"""All-reduces the LayerNorm's two gradients as one flat tensor, keeps deep copies of the layers,
and lets torch's activation checkpointing gather fc1's input again in the backward pass: the
checkpoint keeps only its input, this rank's tokens, and reruns the gather and fc1 when backward
needs them.

replaces: sequence
fails: none
"""

import copy

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint


def _gather(x):
    out = torch.empty(dist.get_world_size() * x.shape[0], *x.shape[1:], dtype=x.dtype)
    all_gather_single(out, x.contiguous())  # noqa: F821 - the setup cell imports it
    return out


def _scatter(x):
    out = torch.empty(x.shape[0] // dist.get_world_size(), *x.shape[1:], dtype=x.dtype)
    reduce_scatter_single(out, x.contiguous())  # noqa: F821
    return out


class AllGatherTokens(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return _gather(x)

    @staticmethod
    def backward(ctx, grad):
        return _scatter(grad)


class ReduceScatterTokens(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return _scatter(x)

    @staticmethod
    def backward(ctx, grad):
        return _gather(grad)


class SequenceParallelBlock(nn.Module):
    def __init__(self, norm, fc1, fc2, rank, world_size):
        super().__init__()
        n = fc1.out_features // world_size
        self.norm = copy.deepcopy(norm)
        self.fc1 = nn.Linear(fc1.in_features, n, bias=False)
        self.fc2 = nn.Linear(n, fc2.out_features, bias=False)
        self.fc1.weight = nn.Parameter(fc1.weight.detach()[rank * n : (rank + 1) * n].clone())
        self.fc2.weight = nn.Parameter(fc2.weight.detach()[:, rank * n : (rank + 1) * n].clone())

    def _gathered_fc1(self, mine):
        return self.fc1(AllGatherTokens.apply(mine))

    def forward(self, x):
        hidden = checkpoint(self._gathered_fc1, self.norm(x), use_reentrant=False)
        return x + ReduceScatterTokens.apply(self.fc2(F.gelu(hidden)))

    def reduce_norm_gradients(self):
        grads = [self.norm.weight.grad, self.norm.bias.grad]
        flat = torch.cat([g.flatten() for g in grads])
        dist.all_reduce(flat)
        for g, part in zip(grads, flat.split([g.numel() for g in grads]), strict=True):
            g.copy_(part.view_as(g))
