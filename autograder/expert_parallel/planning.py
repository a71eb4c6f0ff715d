"""Notebook 09's exercise 5: the planner's ``ep`` axis, checked against the references in
``planner`` on layouts chosen so that each typical mistake changes the answer, named when made:
the expert parameters a GPU holds (`check_expert_params`), and the bytes one token's dispatch and
combine put on NVLink and on the network (`check_ep_link_bytes`)."""

from __future__ import annotations

import math
from collections.abc import Callable

from ..checks import fail, plain_number
from ..combined_parallelism.published import H100_CLUSTER
from . import planner
from .planner import BF16, FP8_WITH_SCALES, H800_CLUSTER, moe_spec

MIXTRAL_LIKE = {  # Mixtral 8x7B's shapes (arXiv 2401.04088): 8 experts, 2 active, no shared expert
    "layers": 32, "moe_layers": 32, "hidden": 4096, "experts": 8, "shared_experts": 0, "top_k": 2,
    "expert_ffn": 14336, "max_nodes": None, "dense_params": 1.6e9,
}  # fmt: skip
WIDE = {  # a fine-grained MoE: many small experts, a shared one
    "layers": 24, "moe_layers": 22, "hidden": 2048, "experts": 64, "shared_experts": 2, "top_k": 6,
    "expert_ffn": 1408, "max_nodes": 2, "dense_params": 1.0e9,
}  # fmt: skip


def _number(value: object, what: str) -> float:
    __tracebackhide__ = True
    number = plain_number(value)
    if number is None or isinstance(number, bool) or not math.isfinite(number):
        fail(f"{what} should return a finite number, got {value!r:.120}")
    return float(number)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * abs(b) + 1e-9


# --- expert parameters a GPU holds -------------------------------------------------------------


def _params_cases(hidden: bool) -> list[tuple[dict, int]]:
    shown = [
        (moe_spec(WIDE, H100_CLUSTER, ep=8, dp=16, tp=1, pp=2, global_batch=64), 11),
        (moe_spec(MIXTRAL_LIKE, H100_CLUSTER, ep=4, dp=8, tp=2, pp=1, global_batch=64), 32),
    ]
    if not hidden:
        return shown
    return shown + [
        (moe_spec(WIDE, H800_CLUSTER, ep=16, dp=32, tp=1, pp=4, global_batch=64), 6),
        (moe_spec(MIXTRAL_LIKE, H100_CLUSTER, ep=8, dp=8, tp=1, pp=4, global_batch=64), 8),
        (moe_spec({**WIDE, "shared_experts": 1}, H100_CLUSTER, ep=1, dp=4, tp=1, pp=1, global_batch=8), 22),
    ]


def _params_mistakes(s: dict, layers: int) -> dict[str, float]:
    expert = planner.expert_params(s)
    return {
        "shard the shared experts over EP too: each runs on every GPU's tokens, so each GPU keeps them "
        "whole": (layers * (s["experts"] + s["shared_experts"]) / s["ep"] * expert),
        "count two matrices an expert: the experts are gated (up, gate and down projections)": (
            layers * (s["experts"] / s["ep"] + s["shared_experts"]) * 2 * s["hidden"] * s["expert_ffn"]
        ),
        "keep every routed expert on every GPU: EP gives each GPU experts/ep of them": (
            layers * (s["experts"] + s["shared_experts"]) * expert
        ),
        "leave out the shared experts": layers * s["experts"] / s["ep"] * expert,
        "count all the model's MoE layers: a GPU holds only its pipeline stage's": (
            s["moe_layers"] * (s["experts"] / s["ep"] + s["shared_experts"]) * expert
        ),
    }


def check_expert_params(fn: Callable, hidden: bool = False) -> None:
    """``fn(spec, moe_layers)``: the expert parameters one GPU holds for its stage's MoE layers."""
    __tracebackhide__ = True
    for s, layers in _params_cases(hidden):
        call = (
            f"expert_params_per_gpu({s['experts']} experts + {s['shared_experts']} shared, "
            f"hidden {s['hidden']}, "
            f"expert_ffn {s['expert_ffn']}, ep {s['ep']}; moe_layers={layers})"
        )
        got = _number(fn(dict(s), layers), call)
        expected = planner.expert_params_per_gpu(s, layers)
        if _close(got, expected):
            continue
        for mistake, value in _params_mistakes(s, layers).items():
            if not _close(value, expected) and _close(got, value):
                fail(f"{call} = {got:.4g}: that is what you get if you {mistake}.")
        fail(f"{call} = {got:.4g}, {'too many' if got > expected else 'too few'}.")


# --- bytes on each link ------------------------------------------------------------------------


def _link_cases(hidden: bool) -> list[dict]:
    shown = [
        moe_spec(WIDE, H100_CLUSTER, ep=32, dp=32, tp=1, pp=1, global_batch=64),
        moe_spec(MIXTRAL_LIKE, H100_CLUSTER, ep=8, dp=8, tp=1, pp=1, global_batch=64),
        moe_spec(
            {**WIDE, "max_nodes": None, "top_k": 4}, H100_CLUSTER, ep=24, dp=24, tp=1, pp=1, global_batch=48
        ),
    ]
    if not hidden:
        return shown
    return shown + [
        moe_spec(
            {**WIDE, "max_nodes": 2, "top_k": 8}, H800_CLUSTER, ep=64, dp=64, tp=1, pp=1, global_batch=64
        ),
        moe_spec({**WIDE, "max_nodes": 8}, H800_CLUSTER, ep=32, dp=64, tp=1, pp=1, global_batch=64),
        moe_spec(MIXTRAL_LIKE, H100_CLUSTER, ep=8, dp=8, tp=2, pp=1, global_batch=64),
        moe_spec(WIDE, {**H100_CLUSTER, "gpus_per_node": 4}, ep=16, dp=16, tp=1, pp=1, global_batch=64),
        moe_spec(WIDE, H100_CLUSTER, ep=64, dp=64, tp=1, pp=1, global_batch=64, dispatch_bytes=BF16),
        moe_spec(
            {**WIDE, "max_nodes": None, "top_k": 2}, H800_CLUSTER, ep=64, dp=64, tp=1, pp=1, global_batch=64
        ),
    ]


def _link_mistakes(s: dict) -> dict[str, dict[str, float]]:
    right = planner.ep_link_bytes(s)
    per_copy = s["hidden"] * (s["dispatch_bytes"] + s["combine_bytes"])
    others = planner.ep_nodes(s) - 1
    limit = s["max_nodes"] or s["top_k"]
    remote = min(s["top_k"], limit, others)
    return {
        "send one copy over the network for each routed expert on another node: a token crosses to a node "
        "once, and is forwarded there over NVLink (its results come back reduced, once a node)": {
            **right,
            "network": (s["top_k"] if others else 0) * per_copy,
        },
        "leave out node-limited routing: a token's experts are on at most max_nodes nodes": {
            **right,
            "network": min(s["top_k"], others) * per_copy,
        },
        "count the token's own node among the nodes it crosses to: it is at most one of the max_nodes, and "
        "the EP group has only nodes - 1 others": {
            **right,
            "network": min(s["top_k"], limit, others + 1) * per_copy,
        },
        "count the EP group's nodes without its TP ranks: with TP innermost, a group of ep EP ranks spans ep "
        "times tp GPUs": {
            **right,
            "network": min(s["top_k"], limit, math.ceil(s["ep"] / s["gpus_per_node"]) - 1) * per_copy,
        },
        "send the combine in the dispatch's format: DeepSeek-V3 combines in BF16 (combine_bytes)": {
            "nvlink": s["top_k"] * s["hidden"] * 2 * s["dispatch_bytes"],
            "network": remote * s["hidden"] * 2 * s["dispatch_bytes"],
        },
        "count only the dispatch: the combine brings every copy's result back": {
            "nvlink": s["top_k"] * s["hidden"] * s["dispatch_bytes"],
            "network": remote * s["hidden"] * s["dispatch_bytes"],
        },
        "leave the copies that cross the network off NVLink: inside the target node each is forwarded to its "
        "expert's GPU over NVLink": {**right, "nvlink": (s["top_k"] - remote) * per_copy},
    }


def check_ep_link_bytes(fn: Callable, hidden: bool = False) -> None:
    """``fn(spec)``: ``{"nvlink": ..., "network": ...}``, the most bytes one token's dispatch and
    combine put on each in one MoE layer's forward."""
    __tracebackhide__ = True
    for s in _link_cases(hidden):
        call = (
            f"ep_link_bytes(hidden {s['hidden']}, top_k {s['top_k']}, ep {s['ep']}, tp {s['tp']}, "
            f"{s['gpus_per_node']} GPUs a node, max_nodes {s['max_nodes']}, dispatch {s['dispatch_bytes']:g} "
            f"and combine {s['combine_bytes']:g} bytes a value)"
        )
        got = fn(dict(s))
        if not isinstance(got, dict) or set(got) != {"nvlink", "network"}:
            fail(f"{call}: return a dict with the keys 'nvlink' and 'network', got {got!r:.120}.")
        values = {k: _number(got[k], f"{call}[{k!r}]") for k in ("nvlink", "network")}
        expected = planner.ep_link_bytes(s)
        if all(_close(values[k], expected[k]) for k in values):
            continue
        for mistake, wrong in _link_mistakes(s).items():
            differs = any(not _close(wrong[k], expected[k]) for k in wrong)
            if differs and all(_close(values[k], wrong[k]) for k in wrong):
                fail(f"{call} = {values}: that is what you get if you {mistake}.")
        off = [
            f"{k} {'too much' if values[k] > expected[k] else 'too little'}"
            for k in values
            if not _close(values[k], expected[k])
        ]
        fail(f"{call} = {values}: {', '.join(off)}.")


__all__ = ["BF16", "FP8_WITH_SCALES", "check_ep_link_bytes", "check_expert_params"]
