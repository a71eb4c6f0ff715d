"""Makes the buffer float32 whatever the parameters' dtype: a float64 model's gradients cannot be
views into it (and copied through it, would lose half their digits).

replaces: flat
fails: test_flat_more
says: attempting to assign a gradient with dtype 'float' to a tensor with grad_dtype 'Double'
"""

import torch
import torch.distributed as dist


class FlatGradients:
    def __init__(self, model):
        params = list(model.parameters())
        self.buffer = torch.zeros(sum(p.numel() for p in params))
        offset = 0
        for p in params:
            p.grad = self.buffer[offset : offset + p.numel()].view_as(p)
            offset += p.numel()

    def zero_grad(self):
        self.buffer.zero_()

    def all_reduce(self):
        dist.all_reduce(self.buffer)
        self.buffer /= dist.get_world_size()
