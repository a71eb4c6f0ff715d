"""Each rank's log-sum-exp per row, all_gathered (one number per row per rank), then combined:
stable without a separate maximum.

replaces: vocab
fails: none
"""

import torch
import torch.distributed as dist


def vocab_parallel_cross_entropy(logits, targets, vocab_start):
    rows, width = logits.shape
    mine = torch.logsumexp(logits, dim=1)
    everyone = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, mine)
    log_total = torch.logsumexp(torch.stack(everyone), dim=0)
    local = targets - vocab_start
    here = (local >= 0) & (local < width)
    target = torch.where(here, logits.gather(1, local.clamp(0, width - 1)[:, None])[:, 0], 0.0)
    dist.all_reduce(target)
    return (log_total - target).mean()
