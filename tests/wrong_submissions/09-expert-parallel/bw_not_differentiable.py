"""The plain all_to_all: the received rows carry no gradient.

replaces: backward
fails: test_backward test_backward_more
says: Wrap it in a torch.autograd.Function
"""

import torch.distributed as dist


def exchange_with_grad(tensor, output_splits, input_splits):
    out = tensor.new_empty((sum(output_splits), *tensor.shape[1:]))
    dist.all_to_all_single(out, tensor.contiguous(), list(output_splits), list(input_splits))
    return out
