"""An explorer of routing: tokens flowing to experts as the router's balance changes, each expert's
load coloured by the expert-parallel rank that owns it, what a capacity drops, and the slowest
rank's load against the mean. The routing is the course's reference plan
(``autograder.expert_parallel.routing.reference_plan``) of random logits with a skew: expert i's
logit is raised by ``skew`` x (1 - i / (E - 1)), so that the first experts are favoured."""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure

from autograder.expert_parallel.balance import reference_balance_loss
from autograder.expert_parallel.model import owned_experts
from autograder.expert_parallel.routing import reference_plan

from .redraw import on_move, redraw

RANK_COLOURS = plt.get_cmap("tab10").colors


def skewed_logits(tokens: int, experts: int, skew: float, seed: int = 0) -> torch.Tensor:
    """Random router logits, expert i's raised by skew x (1 - i / (experts - 1))."""
    generator = torch.Generator().manual_seed(seed)
    ramp = torch.linspace(1, 0, experts) if experts > 1 else torch.zeros(1)
    return torch.randn(tokens, experts, generator=generator) + skew * ramp


def draw_routing(
    tokens: int, experts: int, top_k: int, ranks: int, skew: float, capacity_factor: float | None
) -> Figure:
    """Left: tokens per expert (kept, and dropped past the capacity), by owning rank; right: each
    rank's kept assignments, against the mean."""
    logits = skewed_logits(tokens, experts, skew)
    plan = reference_plan(logits, top_k, "softmax", True, capacity_factor, ranks)
    routed = torch.bincount(plan["experts"].flatten(), minlength=experts)
    kept = plan["expert_counts"]
    loss = reference_balance_loss(logits, plan["experts"], 1.0).item()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.4), gridspec_kw={"width_ratios": [2, 1]})
    colours = [RANK_COLOURS[r % 10] for r in range(ranks) for _ in owned_experts(r, ranks, experts)]
    left.bar(range(experts), kept.tolist(), color=colours, label="computed")
    left.bar(range(experts), (routed - kept).tolist(), bottom=kept.tolist(), color="white", edgecolor="black",
             hatch="//", label="dropped")  # fmt: skip
    if capacity_factor is not None:
        capacity = -(-capacity_factor * tokens * top_k // experts)
        left.axhline(capacity, color="tab:red", linestyle="--", label=f"capacity {capacity:.0f}")
    left.axhline(tokens * top_k / experts, color="gray", linestyle=":", label="balanced")
    left.set_xlabel("expert (colour: the rank that owns it)")
    left.set_ylabel("assignments")
    left.legend(fontsize=8)
    load = plan["rank_counts"].tolist()
    right.bar(range(ranks), load, color=[RANK_COLOURS[r % 10] for r in range(ranks)])
    mean = sum(load) / ranks
    right.axhline(mean, color="gray", linestyle=":")
    right.set_xlabel("EP rank")
    right.set_ylabel("assignments computed")
    dropped = int((~plan["kept"]).sum())
    right.set_title(
        f"slowest / mean {max(load) / mean if mean else 0:.2f}; dropped {dropped / (tokens * top_k):.0%}",
        fontsize=9,
    )
    left.set_title(
        f"{tokens} tokens, top-{top_k}; Switch's loss / alpha = {loss:.2f} (1.00 when balanced)", fontsize=9
    )
    fig.tight_layout()
    return fig


def routing_explorer(
    experts: int = 16, top_k: int = 2, ranks: int = 8, skew: float = 0.5, capacity_factor: float = 0.0
) -> None:
    """Sliders for the router's skew, the experts, top_k, the EP ranks and the capacity factor (0:
    dropless); 1,024 tokens."""
    import ipywidgets as widgets
    from IPython.display import display

    controls = {
        "skew": widgets.FloatSlider(value=skew, min=0.0, max=4.0, step=0.25, description="skew"),
        "experts": widgets.IntSlider(value=experts, min=2, max=32, description="experts"),
        "top_k": widgets.IntSlider(value=top_k, min=1, max=8, description="top_k"),
        "ranks": widgets.IntSlider(value=ranks, min=1, max=8, description="EP ranks"),
        "capacity": widgets.FloatSlider(value=capacity_factor, min=0.0, max=3.0, step=0.25,
                                        description="capacity f."),
    }  # fmt: skip
    output = widgets.Output()

    def update() -> None:
        e, r = controls["experts"].value, controls["ranks"].value
        k = min(controls["top_k"].value, e)
        factor = controls["capacity"].value or None
        redraw(output, lambda: draw_routing(1024, e, k, min(r, e), controls["skew"].value, factor))

    on_move(list(controls.values()), update)
    display(
        widgets.VBox(
            [widgets.HBox(list(controls.values())[:3]), widgets.HBox(list(controls.values())[3:]), output]
        )
    )
    update()
