"""Finds each tensor's first position by searching the list for the same object, and builds the
buckets as lists of (index, bytes) before dropping the sizes.

replaces: buckets
fails: none
"""


def assign_buckets(params, cap_bytes):
    wanted = [
        i
        for i in range(len(params) - 1, -1, -1)
        if params[i].requires_grad and next(j for j, q in enumerate(params) if q is params[i]) == i
    ]
    buckets = []
    for i in wanted:
        size = params[i].numel() * params[i].element_size()
        if buckets and sum(s for _, s in buckets[-1]) + size <= cap_bytes:
            buckets[-1].append((i, size))
        else:
            buckets.append([(i, size)])
    return [[i for i, _ in bucket] for bucket in buckets]
