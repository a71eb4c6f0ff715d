"""The combine sent in the dispatch's format.

replaces: link_bytes
fails: test_link_bytes test_link_bytes_more
says: send the combine in the dispatch's format
"""

import math


def ep_link_bytes(spec):
    per_copy = spec["hidden"] * (spec["dispatch_bytes"] + spec["dispatch_bytes"])
    other_nodes = math.ceil(spec["ep"] * spec["tp"] / spec["gpus_per_node"]) - 1
    limit = spec["max_nodes"] or spec["top_k"]
    remote = min(spec["top_k"], limit, other_nodes)
    return {"nvlink": spec["top_k"] * per_copy, "network": remote * per_copy}
