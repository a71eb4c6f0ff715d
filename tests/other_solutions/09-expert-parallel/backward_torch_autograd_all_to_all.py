"""torch's own differentiable all_to_all (private, but it works on Gloo in torch 2.13).

replaces: backward
fails: none
"""

import torch.distributed as dist
from torch.distributed import _functional_collectives as funcol


# torch's autograd all_to_all: nothing of my own to get wrong, at the price of a private API.
def exchange_with_grad(tensor, output_splits, input_splits):
    return funcol.all_to_all_single_autograd(
        tensor.contiguous(), list(output_splits), list(input_splits), dist.group.WORLD
    )
