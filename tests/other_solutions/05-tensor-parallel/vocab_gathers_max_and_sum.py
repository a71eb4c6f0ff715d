"""Each rank's largest logit and its sum of exp under it, all_gathered (two numbers per row), then
rescaled to the largest over the ranks; the target's logit found with a mask.

replaces: vocab
fails: none
"""

import torch
import torch.distributed as dist


def vocab_parallel_cross_entropy(logits, targets, vocab_start):
    world_size = dist.get_world_size()
    largest = logits.max(dim=1).values
    sums = (logits - largest[:, None]).exp().sum(dim=1)
    mine = torch.stack([largest, sums])
    everyone = [torch.empty_like(mine) for _ in range(world_size)]
    dist.all_gather(everyone, mine)
    maxima = torch.stack([pair[0] for pair in everyone])
    top = maxima.max(dim=0).values
    total = sum(pair[1] * (pair[0] - top).exp() for pair in everyone)
    columns = torch.arange(vocab_start, vocab_start + logits.shape[1])
    hit = columns[None, :] == targets[:, None]
    target = (logits * hit).sum(dim=1)
    dist.all_reduce(target)
    return (top + total.log() - target).mean()
