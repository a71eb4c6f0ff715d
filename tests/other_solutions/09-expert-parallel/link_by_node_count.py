"""Nodes counted by the ranks of the group, the remote copies by cases.

replaces: link_bytes
fails: none
"""


def ep_link_bytes(spec):
    gpus = spec["ep"] * spec["tp"]
    nodes = -(-gpus // spec["gpus_per_node"])
    dispatch = spec["top_k"] * spec["hidden"] * spec["dispatch_bytes"]
    combine = spec["top_k"] * spec["hidden"] * spec["combine_bytes"]
    if nodes == 1:
        return {"nvlink": dispatch + combine, "network": 0}
    crossings = min(spec["top_k"], nodes - 1)
    if spec["max_nodes"] is not None:
        crossings = min(crossings, spec["max_nodes"])
    share = crossings / spec["top_k"]
    return {"nvlink": dispatch + combine, "network": share * (dispatch + combine)}
