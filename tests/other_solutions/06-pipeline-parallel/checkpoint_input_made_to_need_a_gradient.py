"""An autograd Function over the segment's input alone, which it first makes need a gradient (a
detached copy) so that autograd always calls its backward; the last segment runs without
checkpointing, as its outputs are needed at once.

replaces: checkpoint
fails: none
"""

import torch


class Again(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, segment):
        ctx.segment = segment
        ctx.save_for_backward(x)
        return segment(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            x = x.detach().requires_grad_(True)
            torch.autograd.backward(ctx.segment(x), grad)
        return x.grad, None


def checkpointed(layers, x, segments):
    size = len(layers) // segments
    if not x.requires_grad:
        x = x.detach().requires_grad_(True)
    for s in range(segments - 1):
        x = Again.apply(x, layers[s * size : (s + 1) * size])
    return layers[(segments - 1) * size :](x)


def checkpoint_costs(num_layers, segments):
    size = num_layers // segments
    return (segments - 1 + size, num_layers - size)
