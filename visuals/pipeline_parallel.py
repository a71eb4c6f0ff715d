"""Gantt charts of pipeline schedules, drawn from (start, end) times a simulation produced."""

from __future__ import annotations

from collections.abc import Callable

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

MICROBATCH_COLOURS = plt.get_cmap("tab20").colors


def draw_pipeline(times: dict, title: str = "", ax: plt.Axes | None = None) -> Figure:
    """One row per stage, stage 0 on top; each step a bar from its start to its end, labelled with
    its micro-batch, forwards light and backwards dark; idle time is the white between bars.

    ``times`` maps (stage, "F" or "B", micro-batch) to (start, end)."""
    num_stages = 1 + max(stage for stage, _, _ in times)
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.45 * num_stages + 1.0))
    for (stage, kind, i), (start, end) in times.items():
        colour = MICROBATCH_COLOURS[(2 * i + (kind == "F")) % len(MICROBATCH_COLOURS)]
        ax.barh(stage, end - start, left=start, color=colour, edgecolor="white", height=0.8)
        ax.text((start + end) / 2, stage, f"{kind}{i}", ha="center", va="center", fontsize=7)
    total = max(end for _, end in times.values())
    ax.set_xlim(0, total)
    ax.set_yticks(range(num_stages), [f"stage {s}" for s in range(num_stages)])
    ax.invert_yaxis()
    ax.set_xlabel("time (a forward lasts 1 unit)")
    ax.set_title(title, fontsize=9)
    ax.figure.tight_layout()
    return ax.figure


def pipeline_explorer(simulate: Callable, one_f_one_b: Callable, bubble_fraction: Callable):
    """Sliders for the number of stages and of micro-batches, and the schedule, over a Gantt chart
    simulated with the notebook's own ``simulate``, ``one_f_one_b`` and ``bubble_fraction``."""
    import ipywidgets as widgets
    from IPython.display import display

    from autograder.pipeline_parallel import gpipe_order, peak_alive

    stages = widgets.IntSlider(value=4, min=1, max=8, description="stages p")
    microbatches = widgets.IntSlider(value=8, min=1, max=24, description="micro-batches m")
    schedule = widgets.ToggleButtons(options=["GPipe", "1F1B"], value="1F1B")
    output = widgets.Output()

    def update(*_: object) -> None:
        p, m = stages.value, microbatches.value
        order_of = gpipe_order if schedule.value == "GPipe" else one_f_one_b
        orders = [order_of(p, s, m) for s in range(p)]
        times = simulate(orders)
        total = max(end for _, end in times.values())
        idle = (total - 3 * m) / total
        alive = [peak_alive(order) for order in orders]
        with output:
            output.clear_output(wait=True)
            fig = draw_pipeline(
                times,
                f"{schedule.value}: bubble {idle:.1%} of the time (formula {bubble_fraction(p, m):.1%}); "
                f"micro-batches alive at most, by stage: {alive}",
            )
            display(fig)
            plt.close(fig)

    for control in (stages, microbatches, schedule):
        control.observe(update, "value")
    update()
    return widgets.VBox([widgets.HBox([stages, microbatches, schedule]), output])
