"""Works in float64 throughout and returns a float64 loss.

replaces: vocab
fails: none
"""

import torch.distributed as dist


def vocab_parallel_cross_entropy(logits, targets, vocab_start):
    logits = logits.double()
    largest = logits.max(dim=1).values
    dist.all_reduce(largest, op=dist.ReduceOp.MAX)
    total = (logits - largest[:, None]).exp().sum(dim=1)
    dist.all_reduce(total)
    target = logits.new_zeros(logits.shape[0])
    for row, index in enumerate(targets.tolist()):
        if vocab_start <= index < vocab_start + logits.shape[1]:
            target[row] = logits[row, index - vocab_start]
    dist.all_reduce(target)
    return (largest + total.log() - target).mean()
