"""Notebook 09's checks themselves: every mistake they name changes the answer on some case they
run, the references agree with the figures the notebook cites, and the explorer draws."""

from __future__ import annotations

import math

import pytest
import torch
from course import wrong_submissions

from autograder.checks import CheckFailed
from autograder.expert_parallel import dispatch, planner, planning
from autograder.expert_parallel.balance import (
    _SLOWEST_CASES,
    _SLOWEST_HIDDEN,
    BALANCE_MISTAKES,
    SLOWEST_MISTAKES,
    _balance_cases,
    reference_balance_loss,
    reference_slowest,
)
from autograder.expert_parallel.model import make_moe, make_tokens, owned_experts
from autograder.expert_parallel.routing import MISTAKES, plan_cases, reference_plan

ASSIGNMENT = "09-expert-parallel"


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_every_routing_mistake_changes_some_hidden_plan(mistake: str) -> None:
    def differs(case: dict) -> bool:
        args = {"capacity_factor": None, "ep": 1, **case}
        right, wrong = reference_plan(**args), reference_plan(**args, **MISTAKES[mistake])
        return any(not torch.equal(right[k], wrong[k]) for k in right)

    assert any(differs(case) for case in plan_cases(hidden=True))


@pytest.mark.parametrize("mistake", list(BALANCE_MISTAKES))
def test_every_balance_mistake_changes_a_shown_loss(mistake: str) -> None:
    cases = _balance_cases(hidden=False)
    assert any(
        not torch.allclose(
            reference_balance_loss(*c), reference_balance_loss(*c, **BALANCE_MISTAKES[mistake])
        )
        for c in cases
    )


def test_a_uniform_routing_costs_alpha_whatever_the_experts() -> None:
    for n in (4, 8, 16):
        logits = torch.zeros(n * 3, n)
        experts = torch.arange(n * 3).remainder(n)[:, None]
        assert math.isclose(reference_balance_loss(logits, experts, 0.01).item(), 0.01, rel_tol=1e-6)


@pytest.mark.parametrize("how", list(SLOWEST_MISTAKES.values()))
def test_every_slowest_rank_mistake_changes_a_case(how: str) -> None:
    cases = _SLOWEST_CASES + _SLOWEST_HIDDEN
    assert any(not math.isclose(reference_slowest(*c), reference_slowest(*c, how=how)) for c in cases)


def test_silent_experts_receive_nothing_and_ownership_covers_every_expert() -> None:
    moe = make_moe(7, experts=6, top_k=2, silent=(4, 5))
    chosen, _ = moe.router(make_tokens(200, torch.Generator().manual_seed(0)))
    assert not (chosen >= 4).any()
    for world, experts in ((3, 4), (4, 8), (3, 6), (1, 3)):
        owned = [e for r in range(world) for e in owned_experts(r, world, experts)]
        assert owned == list(range(experts))


def test_deepseek_v3_parameters_are_the_papers() -> None:
    """671B in all and about 37B a token (arXiv 2412.19437): the expert shapes give the second."""
    counts = planner.moe_params(planner.DEEPSEEK_V3)
    assert math.isclose(counts["total"], 671e9)
    assert 36.5e9 < counts["active"] < 38e9


def test_the_worked_problems_agree_with_the_planner() -> None:
    s = planner.moe_spec(
        planner.DEEPSEEK_V3, planner.H800_CLUSTER, **planner.DEEPSEEK_V3_LAYOUT, global_batch=1
    )
    link = planner.ep_link_bytes(s)
    assert link["network"] == 4 * 7168 * (1 + 4 / 128 + 2)
    assert link["nvlink"] == 8 * 7168 * (1 + 4 / 128 + 2)
    unlimited = planner.ep_link_bytes({**s, "max_nodes": None})
    assert unlimited["network"] / link["network"] == 7 / 4
    assert planner.expert_params_per_gpu(s, 4) == 4 * 5 * 3 * 7168 * 2048


def test_every_link_mistake_is_told_apart_somewhere() -> None:
    cases = planning._link_cases(hidden=True)
    for mistake in planning._link_mistakes(cases[0]):
        wrong = [planning._link_mistakes(s)[mistake] for s in cases]
        right = [planner.ep_link_bytes(s) for s in cases]
        assert any(w[k] != r[k] for w, r in zip(wrong, right, strict=True) for k in r), mistake


def test_the_explorer_draws_capacity_and_dropless() -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from visuals.experts import draw_routing

    for factor in (None, 1.0):
        figure = draw_routing(256, 8, 2, 4, 2.0, factor)
        assert len(figure.axes) == 2


def test_a_draw_whose_ranks_send_each_other_as_many_rows_as_they_receive_is_told() -> None:
    case = dispatch.SHOWN[0]  # two ranks: often, by chance, rank 0 sends rank 1 as many rows as it receives
    generator = torch.Generator().manual_seed(0)
    draws = []
    for seed in range(200):
        xs = [make_tokens(n, generator) for n in case["tokens"]]
        routing = dispatch.Routing(case, seed, xs)
        every = routing.between["every"]
        assert sum(map(sum, every)) == sum(routing.sent["every"]) == len(routing.x) * case["top_k"]
        draws.append((routing.symmetric(), every[0][1] == every[1][0]))
    assert all(symmetric >= alike for symmetric, alike in draws)
    assert any(symmetric for symmetric, _ in draws) and not all(symmetric for symmetric, _ in draws)


def test_a_layer_that_does_not_exchange_the_counts_fails_every_time() -> None:
    """It passes whenever the ranks happen to send each other as many rows as they receive (about
    one draw in eight for the shown case): the check draws again until they do not."""
    (wrong,) = [w for w in wrong_submissions(ASSIGNMENT) if w.path.stem == "ep_receives_what_it_sends"]
    namespace: dict = {}
    exec(wrong.code, namespace)
    for _ in range(12):
        with pytest.raises(CheckFailed, match="exchange the counts first"):
            dispatch.check_ep_forward(namespace["ep_moe_forward"])
