"""One copy crosses the network for each routed expert on another node.

replaces: link_bytes
fails: test_link_bytes test_link_bytes_more
says: send one copy over the network for each routed expert
"""

import math


def ep_link_bytes(spec):
    per_copy = spec["hidden"] * (spec["dispatch_bytes"] + spec["combine_bytes"])
    other_nodes = math.ceil(spec["ep"] * spec["tp"] / spec["gpus_per_node"]) - 1
    remote = spec["top_k"] if other_nodes else 0
    return {"nvlink": spec["top_k"] * per_copy, "network": remote * per_copy}
