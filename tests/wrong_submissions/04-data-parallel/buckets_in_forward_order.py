"""Fills the buckets from the first parameter, whose gradient backward finishes last.

replaces: buckets
fails: test_buckets test_buckets_more
says: fill the buckets in forward order
"""


def assign_buckets(params, cap_bytes):
    buckets, current, size, seen = [], [], 0, set()
    for i, p in enumerate(params):
        if not p.requires_grad or id(p) in seen:
            continue
        seen.add(id(p))
        nbytes = p.numel() * p.element_size()
        if current and size + nbytes > cap_bytes:
            buckets.append(current)
            current, size = [], 0
        current.append(i)
        size += nbytes
    if current:
        buckets.append(current)
    return buckets
