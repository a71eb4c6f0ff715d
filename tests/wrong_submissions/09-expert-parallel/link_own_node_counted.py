"""The token's own node counted among the nodes it may cross to.

replaces: link_bytes
fails: test_link_bytes test_link_bytes_more
says: count the token's own node among the nodes it crosses to
"""

import math


def ep_link_bytes(spec):
    per_copy = spec["hidden"] * (spec["dispatch_bytes"] + spec["combine_bytes"])
    other_nodes = math.ceil(spec["ep"] * spec["tp"] / spec["gpus_per_node"]) - 1
    limit = spec["max_nodes"] or spec["top_k"]
    remote = min(spec["top_k"], limit, other_nodes + 1)
    return {"nvlink": spec["top_k"] * per_copy, "network": remote * per_copy}
