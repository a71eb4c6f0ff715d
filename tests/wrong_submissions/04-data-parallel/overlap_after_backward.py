"""Notes the ready gradients during backward but starts their all_reduces only in finish().

replaces: overlap
fails: test_overlap test_overlap_more
says: started after backward had computed every gradient
"""

import torch.distributed as dist


class OverlappedSync:
    def __init__(self, model):
        self.ready = []
        for p in model.parameters():
            if p.requires_grad:
                p.register_post_accumulate_grad_hook(self.ready.append)

    def finish(self):
        for param in self.ready:
            dist.all_reduce(param.grad)
            param.grad /= dist.get_world_size()
        self.ready = []
