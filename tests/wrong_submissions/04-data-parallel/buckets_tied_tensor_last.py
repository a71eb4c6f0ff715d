"""Puts a tied tensor where it is first met going backwards, its last position: its gradient is
not final there, since backward has yet to reach the tensor's earlier use.

replaces: buckets
fails: test_buckets_more
says: put the tied tensor at its last position
"""


def assign_buckets(params, cap_bytes):
    buckets, current, size, seen = [], [], 0, set()
    for i in reversed(range(len(params))):
        p = params[i]
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
