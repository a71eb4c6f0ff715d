"""An explorer of training layouts: for a model, a cluster, a number of GPUs and a global batch,
every (tp, pp, dp) layout's memory per GPU and step time, drawn from a planner passed in (the
course's reference, ``autograder.combined_parallelism.planner.predict``, or one of the same form),
each broken down by cause, with the ones that fit marked."""

from __future__ import annotations

from collections.abc import Callable

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from autograder.combined_parallelism.layouts import CLUSTERS, MODELS, layout_grid

from .redraw import on_move, redraw

MEMORY_COLOURS = {"states": "tab:blue", "activations": "tab:orange", "other": "tab:gray"}
TIME_COLOURS = {
    "compute": "tab:green",
    "memory_bound": "tab:olive",
    "bubble": "tab:gray",
    "tp": "tab:purple",
    "cp": "tab:pink",
    "pp": "tab:brown",
    "dp": "tab:red",
    "optimizer": "tab:cyan",
}


def _stacked(ax, rows: range, parts: list[dict], colours: dict, scale: float) -> None:
    left = [0.0] * len(parts)
    for key, colour in colours.items():
        widths = [p.get(key, 0.0) / scale for p in parts]
        if any(widths):
            ax.barh(rows, widths, left=left, color=colour, label=key.replace("_", " "))
            left = [a + b for a, b in zip(left, widths, strict=True)]


def plot_layouts(predict: Callable, specs: list[dict], title: str) -> Figure:
    """Left: memory per GPU by kind against the GPU's memory; right: the step's seconds by cause;
    the fastest layout that fits in bold."""
    fig, (memory_ax, time_ax) = plt.subplots(1, 2, figsize=(11, 0.32 * len(specs) + 1.6), sharey=True)
    if not specs:
        memory_ax.text(0.5, 0.5, "no layout of these GPUs divides the batch", ha="center")
        return fig
    plans = [predict(s) for s in specs]
    hbm = specs[0]["hbm"]
    fits = [p["memory_bytes"] <= hbm for p in plans]
    best = min((p["step_seconds"], i) for i, p in enumerate(plans) if fits[i])[1] if any(fits) else None
    rows = range(len(specs))
    _stacked(memory_ax, rows, [p["memory"] for p in plans], MEMORY_COLOURS, 1e9)
    memory_ax.axvline(hbm / 1e9, color="tab:red", linestyle="--", label=f"{hbm / 1e9:.0f} GB")
    memory_ax.set_xlabel("GB per GPU")
    _stacked(time_ax, rows, [p["time"] for p in plans], TIME_COLOURS, 1.0)
    time_ax.set_xlabel("seconds per step (communication: only what is exposed)")
    labels = [
        f"tp {s['tp']} pp {s['pp']} dp {s['dp']}" + ("" if fits[i] else "  (does not fit)")
        for i, s in enumerate(specs)
    ]
    memory_ax.set_yticks(list(rows), labels, fontsize=8)
    if best is not None:
        memory_ax.get_yticklabels()[best].set_fontweight("bold")
    memory_ax.invert_yaxis()
    memory_ax.legend(fontsize=7, loc="lower right")
    time_ax.legend(fontsize=7, loc="lower right", ncol=2)
    if best is not None:
        s = specs[best]
        title += f"; fastest that fits: tp {s['tp']} pp {s['pp']} dp {s['dp']}, MFU {plans[best]['mfu']:.0%}"
    else:
        title += "; none fits"
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def layout_explorer(predict: Callable):
    """Controls for the model, the cluster, the number of GPUs, the global batch, the ZeRO stage,
    recomputation and how gradients are accumulated, over `plot_layouts`."""
    import ipywidgets as widgets

    model = widgets.Dropdown(options=list(MODELS), value="a 70B Llama", description="model")
    cluster = widgets.Dropdown(options=list(CLUSTERS), description="cluster")
    gpus = widgets.Dropdown(options=[8 * 2**k for k in range(12)], value=128, description="GPUs")
    batch = widgets.Dropdown(options=[2**k for k in range(4, 13)], value=64, description="batch (seq)")
    zero = widgets.Dropdown(options=[0, 1, 2, 3], value=3, description="ZeRO stage")
    recompute = widgets.Dropdown(options=["none", "selective", "full"], description="recompute")
    accumulation = widgets.Dropdown(options=["bf16", "fp32"], description="gradients")
    output = widgets.Output()

    def update(*_: object) -> None:
        chosen, where = MODELS[model.value], CLUSTERS[cluster.value]
        specs = layout_grid(
            chosen,
            where,
            gpus.value,
            batch.value,
            (1, 2, 4, 8, 16, 32, 64),
            zero=zero.value,
            recompute=recompute.value,
            grad_accumulation=accumulation.value,
        )
        title = f"{model.value} on {gpus.value} GPUs of {cluster.value}, {batch.value} sequences a step"
        redraw(output, lambda: plot_layouts(predict, specs, title))

    controls = [model, cluster, gpus, batch, zero, recompute, accumulation]
    on_move(controls, update)
    update()
    return widgets.VBox([widgets.HBox(controls[:4]), widgets.HBox(controls[4:]), output])
