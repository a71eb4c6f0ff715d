"""Node-limited routing left out.

replaces: link_bytes
fails: test_link_bytes test_link_bytes_more
says: leave out node-limited routing
"""

import math


def ep_link_bytes(spec):
    per_copy = spec["hidden"] * (spec["dispatch_bytes"] + spec["combine_bytes"])
    other_nodes = math.ceil(spec["ep"] * spec["tp"] / spec["gpus_per_node"]) - 1
    remote = min(spec["top_k"], other_nodes)
    return {"nvlink": spec["top_k"] * per_copy, "network": remote * per_copy}
