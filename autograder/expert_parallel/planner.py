"""Notebook 08's planner given an ``ep`` axis, for mixture-of-experts models (notebook 09).

08's ``spec`` joins a model, a cluster and a layout; an MoE model adds ``experts`` (routed, per MoE
layer), ``shared_experts``, ``top_k``, ``expert_ffn`` (an expert's intermediate width; experts are
gated, three hidden x expert_ffn matrices), ``moe_layers`` and ``dense_params`` (everything but the
MoE layers' experts); the layout adds ``ep``, borrowed from the data-parallel axis and laid out
innermost (after TP), so that an EP group fills whole nodes; and the all_to_all's formats,
``dispatch_bytes`` and ``combine_bytes`` a value, and ``max_nodes``, node-limited routing's M
(None: no limit).

The references here are what exercise 5's checks compare with: `expert_params_per_gpu`,
`ep_link_bytes`; `moe_params`, `ep_states_bytes` and `all_to_all_seconds` build the rest of a plan
on 08's states and link efficiency (`moe_plan`).
"""

from __future__ import annotations

import math

from ..combined_parallelism import planner
from ..combined_parallelism.layouts import spec

FP8_WITH_SCALES = 1 + 4 / 128  # one byte a value, and one 4-byte scale for each 1 x 128 tile
BF16 = 2.0

H800_CLUSTER = {  # DeepSeek-V3 (arXiv 2412.19437), sections 3.1 and 3.2.2
    "gpus_per_node": 8,
    "peak_flops": 989e12,  # the H800 computes as the H100 SXM does; its NVLink is cut down
    "hbm": 80e9,
    "nvlink": 160e9,
    "network": 50e9,
}
DEEPSEEK_V3 = {  # DeepSeek-V3 (arXiv 2412.19437), sections 2 and 4.2
    "layers": 61,
    "moe_layers": 58,  # all but the first 3
    "hidden": 7168,
    "experts": 256,
    "shared_experts": 1,
    "top_k": 8,
    "expert_ffn": 2048,
    "max_nodes": 4,
    # 671B in all less the 58 layers' 257 experts: attention (MLA), embeddings, the 3 dense layers
    "dense_params": 671e9 - 58 * 257 * 3 * 7168 * 2048,
}
DEEPSEEK_V3_LAYOUT = {"ep": 64, "pp": 16, "dp": 128, "tp": 1}  # 2,048 GPUs; EP 64 over 8 nodes


def moe_spec(model: dict, cluster: dict, **layout: object) -> dict:
    """08's ``spec`` with the MoE model's keys, FP8 dispatch and BF16 combine unless said."""
    return spec(
        model, cluster, **{"dispatch_bytes": FP8_WITH_SCALES, "combine_bytes": BF16, "cp": 1, **layout}
    )


def expert_params(s: dict) -> int:
    """Parameters of one expert: three hidden x expert_ffn matrices (gated)."""
    return 3 * s["hidden"] * s["expert_ffn"]


def moe_params(s: dict) -> dict[str, float]:
    """The parameters in all, and those one token goes through (its top_k and the shared experts)."""
    expert = expert_params(s)
    per_layer_total = (s["experts"] + s["shared_experts"]) * expert
    per_layer_active = (s["top_k"] + s["shared_experts"]) * expert
    return {
        "total": s["dense_params"] + s["moe_layers"] * per_layer_total,
        "active": s["dense_params"] + s["moe_layers"] * per_layer_active,
    }


def expert_params_per_gpu(s: dict, moe_layers: int) -> float:
    """The expert parameters one GPU holds for ``moe_layers`` MoE layers (those of its stage): its
    ep-th of the routed experts, and every shared expert whole (they run on every GPU's tokens)."""
    return moe_layers * (s["experts"] / s["ep"] + s["shared_experts"]) * expert_params(s)


def ep_nodes(s: dict) -> int:
    """Nodes an EP group spans: EP is laid out innermost (after TP), so it fills whole nodes."""
    return max(1, math.ceil(s["ep"] * s.get("tp", 1) / s["gpus_per_node"]))


def ep_link_bytes(s: dict) -> dict[str, float]:
    """The most bytes one token's dispatch and combine put on each kind of link in one MoE layer's
    forward: every routed copy crosses NVLink once (to its expert's GPU, from its own or from the
    GPU that received it over the network); the network carries one copy to each other node the
    token's experts are on (then forwarded inside the node), and the combine's results come back
    reduced inside each node, one copy a node: at most top_k, max_nodes and the other nodes of the
    EP group."""
    per_copy = s["hidden"] * (s["dispatch_bytes"] + s["combine_bytes"])
    others = ep_nodes(s) - 1
    limit = s["max_nodes"] if s.get("max_nodes") else s["top_k"]
    remote = min(s["top_k"], limit, others)
    return {"nvlink": s["top_k"] * per_copy, "network": remote * per_copy}


def ep_states_bytes(s: dict, moe_layers: int, dense_params: float) -> float:
    """Parameters, gradients and optimizer states a GPU keeps (08's ``state_bytes``, ZeRO stage
    ``zero``): its experts over the ranks that hold the same experts (dp / ep of them), the rest of
    its stage's parameters over the whole dp."""
    experts = expert_params_per_gpu(s, moe_layers)
    accumulation = s.get("grad_accumulation", "fp32")
    return planner.state_bytes(experts, s["dp"] // s["ep"], s["zero"], accumulation) + planner.state_bytes(
        dense_params, s["dp"], s["zero"], accumulation
    )


def all_to_all_seconds(s: dict, tokens_per_gpu: int) -> dict[str, float]:
    """One MoE layer's forward dispatch and combine for ``tokens_per_gpu`` tokens, on each link at
    08's ring efficiency (all_to_all is not a ring; the course uses the same fraction)."""
    traffic = ep_link_bytes(s)
    return {
        "nvlink": tokens_per_gpu * traffic["nvlink"] / (s["nvlink"] * planner.LINK_EFFICIENCY),
        "network": tokens_per_gpu * traffic["network"] / (s["network"] * planner.LINK_EFFICIENCY),
    }


def moe_plan(s: dict, tokens_per_gpu: int) -> dict:
    """What the notebook prints for a layout: parameters, expert memory, all_to_all bytes and time."""
    stage_moe_layers = math.ceil(s["moe_layers"] / s["pp"])
    return {
        "params": moe_params(s),
        "expert_params_per_gpu": expert_params_per_gpu(s, stage_moe_layers),
        "bytes_per_token": ep_link_bytes(s),
        "seconds_per_layer": all_to_all_seconds(s, tokens_per_gpu),
    }
