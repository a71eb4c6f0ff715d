"""busbw from the bytes that cross the busiest link, counted collective by collective; a list for the pair.

replaces: bandwidths
fails: none
"""


def bandwidths(name, count, dtype, seconds, world_size):
    n = world_size
    share = count * dtype.itemsize  # what each rank passes in
    whole = share * n if name in ("all_gather", "gather") else share
    piece = whole / n  # one rank's part of the whole array
    if name == "all_reduce":
        on_link = 2 * (n - 1) * piece  # a reduce-scatter, then an all-gather
    elif name in ("broadcast", "reduce"):
        on_link = whole  # a pipelined chain: all of it, once, over each link (one rank too, by convention)
    else:
        on_link = (n - 1) * piece  # everything but what the rank holds itself
    return [whole / seconds / 1e9, on_link / seconds / 1e9]
