"""Returns the contiguous split, two chunks a rank in order: the last rank keeps the most causal work.

replaces: zigzag
fails: test_zigzag test_zigzag_more
says: split the sequence in world_size contiguous spans
"""


def zigzag_layout(seq_len, world_size):
    base, extra = divmod(seq_len, world_size)
    spans, start = [], 0
    for r in range(world_size):
        stop = start + base + (1 if r < extra else 0)
        spans.append([(start, stop)])
        start = stop
    return spans
