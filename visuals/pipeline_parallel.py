"""Gantt charts of pipeline schedules, drawn from (start, end) times a simulation produced."""

from __future__ import annotations

from collections.abc import Callable

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

MICROBATCH_COLOURS = plt.get_cmap("tab20").colors


def draw_pipeline(times: dict, title: str = "", ax: plt.Axes | None = None) -> Figure:
    """One row per stage, stage 0 on top; each step a bar from its start to its end, labelled with
    its micro-batch, forwards light and backwards dark (a weights' gradient hatched); idle time is
    the white between bars.

    ``times`` maps (stage, kind, micro-batch) to (start, end), or (GPU, kind, micro-batch, chunk)
    for interleaved chunks, a label ``F3/1`` then saying micro-batch 3 in chunk 1; kind is "F",
    "B", or "W" where the backward is split into the input's gradient and the weights'."""
    num_stages = 1 + max(key[0] for key in times)
    chunked = len(next(iter(times))) == 4
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 0.45 * num_stages + 1.0))
    for key, (start, end) in times.items():
        stage, kind, i = key[:3]
        colour = MICROBATCH_COLOURS[(2 * i + (kind == "F")) % len(MICROBATCH_COLOURS)]
        hatch = "///" if kind == "W" else None
        ax.barh(stage, end - start, left=start, color=colour, edgecolor="white", height=0.8, hatch=hatch)
        label = f"{kind}{i}/{key[3]}" if chunked else f"{kind}{i}"
        ax.text((start + end) / 2, stage, label, ha="center", va="center", fontsize=6 if chunked else 7)
    total = max(end for _, end in times.values())
    ax.set_xlim(0, total)
    row = "GPU" if chunked else "stage"
    ax.set_yticks(range(num_stages), [f"{row} {s}" for s in range(num_stages)])
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
