"""An autograd Function whose only tensor input is the segment's input: when that needs no gradient
(the first stage's data), autograd never calls its backward, and the checkpointed segments'
parameters get no gradient.

replaces: checkpoint
fails: test_checkpoint
says: on an input that needs no gradient
"""

import torch


class Segment(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, segment):
        ctx.segment = segment
        ctx.save_for_backward(x)
        return segment(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        x = x.detach().requires_grad_(True)
        with torch.enable_grad():
            y = ctx.segment(x)
        y.backward(grad)  # the parameters' gradients accumulate in .grad
        return x.grad, None


def checkpointed(layers, x, segments):
    size = len(layers) // segments
    for start in range(0, len(layers), size):
        x = Segment.apply(x, layers[start : start + size])
    return x


def checkpoint_costs(num_layers, segments):
    return (segments, num_layers)
