"""Starts a new bucket when the next parameter would bring the current one up to the cap, not over it.

replaces: buckets
fails: test_buckets test_buckets_more
says: bring it up to the cap
"""


def assign_buckets(params, cap_bytes):
    buckets, current, size, seen = [], [], 0, set()
    for i in reversed(range(len(params))):
        p = params[i]
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        nbytes = p.numel() * p.element_size()
        if current and size + nbytes >= cap_bytes:
            buckets.append(current)
            current, size = [], 0
        current.append(i)
        size += nbytes
    if current:
        buckets.append(current)
    return buckets
