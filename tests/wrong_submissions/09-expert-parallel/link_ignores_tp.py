"""The EP group's nodes counted without the TP ranks laid out inside it.

replaces: link_bytes
fails: test_link_bytes_more
says: count the EP group's nodes without its TP ranks
"""

import math


def ep_link_bytes(spec):
    per_copy = spec["hidden"] * (spec["dispatch_bytes"] + spec["combine_bytes"])
    other_nodes = math.ceil(spec["ep"] * 1 / spec["gpus_per_node"]) - 1
    limit = spec["max_nodes"] or spec["top_k"]
    remote = min(spec["top_k"], limit, other_nodes)
    return {"nvlink": spec["top_k"] * per_copy, "network": remote * per_copy}
