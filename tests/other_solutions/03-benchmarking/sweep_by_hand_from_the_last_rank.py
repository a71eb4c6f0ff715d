"""busbw from its own factors, through a partial; the last rank's results kept; pairs as lists.

replaces: sweep
fails: none
"""

import functools

import torch


def _timings(rank, world_size, name, sizes, timer):
    return [timer(rank, world_size, name, size) for size in sizes]


def sweep(name, sizes, world_size, timer):
    job = functools.partial(_timings, name=name, sizes=sizes, timer=timer)
    per_rank = launch(job, world_size, check_collectives=False)  # noqa: F821 - the setup cell imports it
    seconds = per_rank[-1]
    pairs = []
    for size, t in zip(sizes, seconds, strict=True):
        chunk = size // (4 * world_size)
        count = chunk if name in ("all_gather", "gather") else world_size * chunk
        _, busbw = bandwidths(name, count, torch.float32, t, world_size)  # noqa: F821
        pairs.append([t, busbw])
    return pairs
