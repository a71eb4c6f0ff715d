"""Puts a tied tensor into the buckets once for each time it is listed.

replaces: buckets
fails: test_buckets_more
says: put the tied tensor in twice
"""


def assign_buckets(params, cap_bytes):
    buckets, current, size = [], [], 0
    for i in reversed(range(len(params))):
        p = params[i]
        if not p.requires_grad:
            continue
        nbytes = p.numel() * p.element_size()
        if current and size + nbytes > cap_bytes:
            buckets.append(current)
            current, size = [], 0
        current.append(i)
        size += nbytes
    if current:
        buckets.append(current)
    return buckets
