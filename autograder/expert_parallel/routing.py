"""Notebook 09's exercise 1: the routing plan, a pure function of the router's logits.

The reference (`reference_plan`) and the check (`check_routing_plan`), on cases chosen so that each
typical mistake changes the answer: exact ties (a sigmoid saturates to 1.0 in float32), capacity
that binds, experts that share a rank, token counts that do not divide."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..checks import allclose, fail, tensors_equal
from .model import owner

KEYS = ("experts", "weights", "kept", "expert_counts", "rank_counts")


def _scores(logits: torch.Tensor, score: str) -> torch.Tensor:
    return logits.softmax(-1) if score == "softmax" else logits.sigmoid()


def reference_plan(
    logits: torch.Tensor,
    top_k: int,
    score: str = "softmax",
    normalise: bool = True,
    capacity_factor: float | None = None,
    ep: int = 1,
    *,
    ties_high: bool = False,
    renormalise: bool | None = None,
    capacity_per_rank: bool = False,
    token_first: bool = False,
    capacity_rounding: Callable[[float], int] = math.ceil,
    zero_dropped: bool = False,
    counts_before_drops: bool = False,
) -> dict[str, torch.Tensor]:
    """The plan; the keyword-only arguments make the typical mistakes, for the check's messages."""
    tokens, experts = logits.shape
    scores = _scores(logits, score)
    if ties_high:  # ties to the higher-numbered expert
        order = experts - 1 - torch.sort(scores.flip(-1), dim=-1, descending=True, stable=True).indices
    else:
        order = torch.sort(scores, dim=-1, descending=True, stable=True).indices
    chosen = order[:, :top_k]
    weights = scores.gather(-1, chosen)
    if normalise if renormalise is None else renormalise:
        weights = weights / weights.sum(-1, keepdim=True)
    kept = torch.ones(tokens, top_k, dtype=torch.bool)
    if capacity_factor is not None:
        capacity = capacity_rounding(capacity_factor * tokens * top_k / experts)
        per_rank = [len(range(r * experts // ep, (r + 1) * experts // ep)) for r in range(ep)]
        used = [0] * (ep if capacity_per_rank else experts)
        slots = (
            [(t, k) for t in range(tokens) for k in range(top_k)]
            if token_first
            else [(t, k) for k in range(top_k) for t in range(tokens)]
        )
        for t, k in slots:
            e = int(chosen[t, k])
            where = owner(e, ep, experts) if capacity_per_rank else e
            limit = capacity * per_rank[where] if capacity_per_rank else capacity
            if used[where] < limit:
                used[where] += 1
            else:
                kept[t, k] = False
    if zero_dropped:
        weights = weights * kept
    counted = torch.ones_like(kept) if counts_before_drops else kept
    expert_counts = torch.zeros(experts, dtype=torch.long).index_add_(
        0, chosen.flatten(), counted.flatten().long()
    )
    rank_counts = torch.tensor(
        [int(expert_counts[r * experts // ep : (r + 1) * experts // ep].sum()) for r in range(ep)]
    )
    return {
        "experts": chosen,
        "weights": weights,
        "kept": kept,
        "expert_counts": expert_counts,
        "rank_counts": rank_counts,
    }


TIES = (
    "ties broken differently: every rank must break a tie the same way, towards the lower-numbered "
    "expert (a stable sort; torch.topk promises no order among equal values)"
)


def _same_scores(value: object, expected: dict, args: dict) -> bool:
    """Whether ``value`` chooses, for every token, experts with the very scores the plan chooses."""
    if (
        type(value) is not torch.Tensor
        or value.shape != expected["experts"].shape
        or value.is_floating_point()
    ):
        return False
    scores = _scores(args["logits"], args["score"])
    if value.numel() and (value.min() < 0 or value.max() >= scores.shape[1]):
        return False
    return tensors_equal(scores.gather(-1, value.long()), scores.gather(-1, expected["experts"]))


MISTAKES = {
    "weights not normalised among the chosen experts, where `normalise` asks for it": {"renormalise": False},
    "weights normalised among the chosen experts where `normalise` is False (keep the scores as they are)": {
        "renormalise": True
    },
    TIES: {"ties_high": True},
    "the capacity applied to each EP rank's experts together, not to each expert": {
        "capacity_per_rank": True
    },
    "each token's choices placed before the next token's: every token's first choice goes before any "
    "token's second choice": {"token_first": True},
    "the capacity rounded down; round it up": {"capacity_rounding": math.floor},
    "the dropped assignments' weights set to zero: the plan keeps the router's weights, and says what "
    "is dropped in `kept`": {"zero_dropped": True},
    "the dropped assignments included in the counts: count only what an expert will compute": {
        "counts_before_drops": True
    },
}


def _logits(tokens: int, experts: int, seed: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(tokens, experts, generator=torch.Generator().manual_seed(seed)) * scale


def _tied(tokens: int, experts: int, seed: int, saturate: bool) -> torch.Tensor:
    """Logits with exact ties: values drawn from a few levels, or (for a sigmoid) large enough
    that several scores round to 1.0."""
    generator = torch.Generator().manual_seed(seed)
    if saturate:
        return 20.0 + 10 * torch.rand(tokens, experts, generator=generator)
    levels = torch.tensor([-1.0, 0.0, 0.5, 2.0])
    return levels[torch.randint(0, 4, (tokens, experts), generator=generator)]


def plan_cases(hidden: bool) -> list[dict]:
    shown = [
        {"logits": _logits(6, 4, 1), "top_k": 2, "score": "softmax", "normalise": True},
        {"logits": _logits(8, 4, 2, 2.0), "top_k": 1, "score": "softmax", "normalise": False,
         "capacity_factor": 1.0, "ep": 2},
        {"logits": _tied(5, 4, 3, saturate=False), "top_k": 2, "score": "sigmoid", "normalise": True},
    ]  # fmt: skip
    if not hidden:
        return shown
    return shown + [
        {"logits": _tied(7, 6, 4, saturate=True), "top_k": 3, "score": "sigmoid", "normalise": True},
        {"logits": _tied(9, 5, 5, saturate=False), "top_k": 2, "score": "softmax", "normalise": False},
        {"logits": _logits(10, 6, 6, 3.0), "top_k": 2, "score": "softmax", "normalise": True,
         "capacity_factor": 1.25, "ep": 3},
        {"logits": _logits(11, 4, 7, 3.0), "top_k": 2, "score": "sigmoid", "normalise": True,
         "capacity_factor": 1.0, "ep": 2},
        {"logits": _logits(7, 5, 8, 3.0), "top_k": 1, "score": "softmax", "normalise": True,
         "capacity_factor": 1.5, "ep": 4},
        {"logits": _logits(9, 8, 9, 4.0), "top_k": 2, "score": "sigmoid", "normalise": False,
         "capacity_factor": 0.5, "ep": 4},
        {"logits": _logits(4, 3, 10), "top_k": 3, "score": "softmax", "normalise": True, "ep": 3},
    ]  # fmt: skip


def _same(got: object, expected: torch.Tensor, key: str) -> bool:
    if type(got) is not torch.Tensor or got.shape != expected.shape:
        return False
    if key == "weights":
        return got.is_floating_point() and allclose(
            got.detach().double(), expected.double(), rtol=1e-5, atol=1e-7
        )
    if key == "kept":
        return got.dtype == torch.bool and tensors_equal(got, expected)
    if got.is_floating_point() or got.is_complex() or got.dtype == torch.bool:
        return False
    return tensors_equal(got.long(), expected.long())


def _describe(case: dict) -> str:
    extra = {k: v for k, v in case.items() if k not in ("logits",)}
    arguments = ", ".join(f"{k}={v!r}" for k, v in extra.items())
    return f"routing_plan(logits of {tuple(case['logits'].shape)}, {arguments})"


def check_routing_plan(fn: Callable, hidden: bool = False) -> None:
    """``fn(logits, top_k, score, normalise, capacity_factor=None, ep=1)``: a dict of the plan's
    five tensors, each equal to the reference's."""
    __tracebackhide__ = True
    for case in plan_cases(hidden):
        args = {"capacity_factor": None, "ep": 1, **case}
        call = _describe(case)
        expected = reference_plan(**args)
        got = fn(**{**args, "logits": case["logits"].clone()})
        if not isinstance(got, dict) or set(got) != set(KEYS):
            keys = sorted(got) if isinstance(got, dict) else type(got).__name__
            fail(f"{call}: return a dict with the keys {list(KEYS)}, got {keys}.")
        if all(_same(got[key], expected[key], key) for key in KEYS):
            continue
        for mistake, how in MISTAKES.items():  # a mistake that explains the whole plan
            variant = reference_plan(**args, **how)
            if all(_same(got[key], variant[key], key) for key in KEYS):
                fail(f"{call}: that is the plan you get with {mistake}.")
        for key in KEYS:
            if _same(got[key], expected[key], key):
                continue
            value = got[key]
            if key == "experts" and _same_scores(value, expected, args):
                fail(
                    f"{call}: 'experts' picks experts of the same scores as the right plan, but not the same "
                    f"ones: {TIES}."
                )
            shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            message = f"{call}: {key!r} is not right (got {shape}"
            message += f", {value.dtype})" if isinstance(value, torch.Tensor) else ")"
            for mistake, how in MISTAKES.items():
                variant = reference_plan(**args, **how)
                if not _same(variant[key], expected[key], key) and _same(value, variant[key], key):
                    fail(f"{message}: that is what you get with {mistake}.")
            fail(
                f"{message}; expected shape {tuple(expected[key].shape)}, dtype {expected[key].dtype}"
                f"{'' if key.endswith('counts') else ', rows in the order of the tokens'}."
            )
