"""Notebook 09's exercise 4: load balancing.

- `check_balance_loss`: Switch Transformer's auxiliary loss (Fedus et al., arXiv 2101.03961,
  section 2.2), alpha * N * sum_i f_i * P_i, its value and its gradient: f_i, a fraction of the
  assignments, is a count and carries none.
- `check_slowest_rank`: the seconds of the slowest expert-parallel rank, predicted from a routing.
- `measure_sleeping_experts`: that time measured on ranks whose experts sleep instead of compute.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch
import torch.distributed as dist

from ..checks import allclose, fail, plain_number, run_ranks
from .model import owned_experts

# --- the auxiliary loss ------------------------------------------------------------------------


def reference_balance_loss(
    logits: torch.Tensor,
    experts: torch.Tensor,
    alpha: float,
    *,
    f_per_token: bool = False,
    no_n: bool = False,
    f_from_probabilities: bool = False,
    p_from_chosen: bool = False,
) -> torch.Tensor:
    tokens, n = logits.shape
    probabilities = logits.softmax(-1)
    if f_from_probabilities:
        f = probabilities.mean(0)
    else:
        counts = torch.zeros(n).index_add_(0, experts.flatten(), torch.ones(experts.numel()))
        f = counts / (tokens if f_per_token else experts.numel())
    if p_from_chosen:
        p = (
            torch.zeros(n).index_add(0, experts.flatten(), probabilities.gather(-1, experts).flatten())
            / tokens
        )
    else:
        p = probabilities.mean(0)
    return alpha * (1 if no_n else n) * (f * p).sum()


BALANCE_MISTAKES = {
    "count f_i as a fraction of the tokens, not of the T·k assignments (with top-k its sum is k, not 1)": {
        "f_per_token": True
    },
    "leave out the factor N, the number of experts (with it a uniform routing's loss is alpha, "
    "whatever N is)": {"no_n": True},
    "take f_i from the probabilities: f_i is the fraction of assignments that go to expert i, a count": {
        "f_from_probabilities": True
    },
    "take P_i only from the chosen experts' probabilities: P_i is the mean of the router's probability for "
    "expert i over every token": {"p_from_chosen": True},
}


def _balance_cases(hidden: bool) -> list[tuple]:
    def case(tokens: int, n: int, k: int, seed: int, alpha: float, skew: float = 0.0) -> tuple:
        generator = torch.Generator().manual_seed(seed)
        logits = torch.randn(tokens, n, generator=generator) + skew * torch.linspace(1, 0, n)
        experts = torch.sort(logits, dim=-1, descending=True, stable=True).indices[:, :k]
        return logits, experts, alpha

    shown = [case(8, 4, 2, 1, 0.01), case(6, 3, 1, 2, 0.01, skew=2.0)]
    return shown + (
        [case(13, 8, 2, 3, 0.01, 3.0), case(5, 6, 3, 4, 0.1), case(9, 5, 1, 5, 0.001, 1.0)] if hidden else []
    )


def check_balance_loss(fn: Callable, hidden: bool = False) -> None:
    """``fn(logits, experts, alpha)``: Switch's loss as a scalar tensor, its gradient on the logits."""
    __tracebackhide__ = True
    for logits, experts, alpha in _balance_cases(hidden):
        call = f"balance_loss(logits {tuple(logits.shape)}, top-{experts.shape[1]}, alpha={alpha})"
        expected = reference_balance_loss(logits, experts, alpha)
        given = logits.clone().requires_grad_()
        got = fn(given, experts.clone(), alpha)
        if type(got) is not torch.Tensor or got.numel() != 1 or not got.is_floating_point():
            fail(
                f"{call}: return the loss as a one-element float tensor (autograd needs it), "
                f"got {got!r:.100}."
            )
        if not allclose(got.detach().double().reshape(()), expected.double(), rtol=1e-5, atol=1e-9):
            for mistake, how in BALANCE_MISTAKES.items():
                wrong = reference_balance_loss(logits, experts, alpha, **how)
                if allclose(got.detach().double().reshape(()), wrong.double(), rtol=1e-5, atol=1e-9):
                    fail(f"{call} = {got.item():.6g}: that is what you get if you {mistake}.")
            fail(f"{call} = {got.item():.6g}, not Switch's alpha · N · Σ f_i · P_i = {expected.item():.6g}.")
        if not got.requires_grad:
            fail(f"{call}: the loss has no gradient: P_i, the mean probability, must keep its graph.")
        got.sum().backward()
        reference = logits.clone().requires_grad_()
        reference_balance_loss(reference, experts, alpha).backward()
        if given.grad is None or not allclose(given.grad, reference.grad, rtol=1e-4, atol=1e-8):
            fail(
                f"{call}: the value is right but its gradient on the logits is not: f_i is a fraction of a "
                "count (which tokens went where) and carries no gradient; only P_i, the mean probability, "
                "does."
            )


# --- the slowest rank --------------------------------------------------------------------------


def reference_slowest(
    counts: Sequence[int],
    world_size: int,
    seconds_per_token: float,
    seconds_per_call: float,
    *,
    how: str = "",
) -> float:
    n = len(counts)
    if how == "round_robin":
        ranks = [[e for e in range(n) if e % world_size == r] for r in range(world_size)]
    else:
        ranks = [list(owned_experts(r, world_size, n)) for r in range(world_size)]

    def cost(e: int) -> float:
        if how == "silent_calls" or counts[e]:
            return seconds_per_call + counts[e] * seconds_per_token
        return 0.0

    per_rank = [sum(cost(e) for e in es) for es in ranks]
    if how == "mean":
        return sum(per_rank) / world_size
    if how == "max_expert":
        return max(cost(e) for e in range(n))
    if how == "no_calls":
        return max(sum(counts[e] for e in es) * seconds_per_token for es in ranks)
    return max(per_rank)


SLOWEST_MISTAKES = {
    "take the mean over the ranks: a step waits for the slowest rank, since the combine needs every "
    "rank's results": "mean",
    "take the busiest expert: a rank runs all of its experts, one after the other": "max_expert",
    "give experts to ranks round-robin: rank r owns the contiguous block r·E//p up to "
    "(r+1)·E//p": "round_robin",
    "charge a call to an expert that received no token: it is not run at all": "silent_calls",
    "leave out the cost of each expert's call": "no_calls",
}

_SLOWEST_CASES = [
    ([3, 2, 0, 6], 2, 1e-3, 2e-3),
    ([1, 9, 3, 3, 0, 0], 3, 2e-3, 1e-3),
]
_SLOWEST_HIDDEN = [
    ([5, 0, 0, 7, 1, 1, 2, 8], 4, 1e-3, 5e-3),
    ([4, 4, 4, 4, 4], 2, 1e-3, 1e-3),
    ([0, 0, 3], 1, 2e-3, 4e-3),
    ([10, 0, 0, 0, 1, 1], 4, 1e-4, 1e-3),
]


def check_slowest_rank(fn: Callable, hidden: bool = False) -> None:
    """``fn(expert_counts, world_size, seconds_per_token, seconds_per_call)``: the slowest rank's seconds."""
    __tracebackhide__ = True
    for counts, ws, per_token, per_call in _SLOWEST_CASES + (_SLOWEST_HIDDEN if hidden else []):
        call = (
            f"slowest_rank_seconds({counts}, world_size={ws}, {per_token:g} s a token, {per_call:g} s a call)"
        )
        value = plain_number(fn(list(counts), ws, per_token, per_call))
        if value is None:
            fail(f"{call}: return a number of seconds.")
        expected = reference_slowest(counts, ws, per_token, per_call)
        if abs(value - expected) <= 1e-9 + 1e-6 * expected:
            continue
        for mistake, how in SLOWEST_MISTAKES.items():
            wrong = reference_slowest(counts, ws, per_token, per_call, how=how)
            if abs(wrong - expected) > 1e-9 and abs(value - wrong) <= 1e-9 + 1e-6 * abs(wrong):
                fail(f"{call} = {value:.4g}: that is what you get if you {mistake}.")
        fail(
            f"{call} = {value:.4g} s is not the slowest rank's time "
            f"({'too much' if value > expected else 'too little'})."
        )


def _sleeping_rank(rank: int, world_size: int, counts: list[int], per_token: float, per_call: float) -> float:
    dist.barrier()
    start = time.perf_counter()
    for e in owned_experts(rank, world_size, len(counts)):
        if counts[e]:
            time.sleep(per_call + counts[e] * per_token)  # an expert that "computes" its tokens
    dist.barrier()  # the combine: every rank waits for the slowest
    return time.perf_counter() - start


def measure_sleeping_experts(
    counts: Sequence[int], world_size: int, seconds_per_token: float, seconds_per_call: float
) -> float:
    """Run a routing's experts as sleeps on ``world_size`` ranks; the seconds until every rank's
    results could be combined (a barrier after the experts), the slowest rank's."""
    times = run_ranks(_sleeping_rank, world_size, list(counts), seconds_per_token, seconds_per_call)
    return max(times)
