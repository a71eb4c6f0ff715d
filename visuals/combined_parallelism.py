"""An explorer of training layouts: for a model, a cluster, a number of GPUs and a global batch,
every (tp, pp, dp) layout's memory per GPU and step time, drawn from the notebook's own
``step_memory`` and ``step_time`` (passed in), broken down, with the ones that fit marked.

The breakdowns come from the student's functions themselves: the states are the memory of a
micro-batch of 0 sequences (no activations), and compute with the bubble is the time on a cluster
whose links are infinitely fast (no communication)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from autograder.combined_parallelism.layouts import (
    A100_NODES,
    GPT_13B,
    H100_NODES,
    LLAMA3_405B,
    LLAMA_70B,
    MEGATRON_1T,
    Cluster,
    Config,
    Model,
)

from .redraw import on_move, redraw

MODELS = {m.name: m for m in (GPT_13B, LLAMA_70B, LLAMA3_405B, MEGATRON_1T)}
CLUSTERS = {c.name: c for c in (H100_NODES, A100_NODES)}


def layouts(model: Model, gpus: int, batch: int, zero: int, recompute: bool) -> list[Config]:
    """Every tp (a power of two up to 16) and pp (dividing the layers) with dp = the rest, where
    dp divides the global batch of ``batch`` sequences; micro-batch 1."""
    found = []
    for tp in (1, 2, 4, 8, 16):
        for pp in (1, 2, 4, 8, 16, 32, 64):
            if gpus % (tp * pp) or pp > model.layers:
                continue
            dp = gpus // (tp * pp)
            if batch % dp:
                continue
            found.append(Config(dp, tp, pp, zero, 1, batch // dp, recompute, tp > 1))
    return found


def plot_layouts(
    step_memory: Callable, step_time: Callable, model: Model, cluster: Cluster, configs: list[Config]
) -> Figure:
    """Left: memory per GPU (states, activations) against the GPU's memory; right: step time
    (compute with the bubble, communication); the fastest layout that fits in bold."""
    fig, (memory_ax, time_ax) = plt.subplots(1, 2, figsize=(11, 0.32 * len(configs) + 1.4), sharey=True)
    if not configs:
        memory_ax.text(0.5, 0.5, "no layout of these GPUs divides the batch", ha="center")
        return fig
    free_links = replace(cluster, nvlink=math.inf, network=math.inf)
    memory = [step_memory(model, cluster, c) / 1e9 for c in configs]
    states = [step_memory(model, cluster, replace(c, micro_batch=0)) / 1e9 for c in configs]
    time = [step_time(model, cluster, c) for c in configs]
    compute = [step_time(model, free_links, c) for c in configs]
    fits = [m <= cluster.hbm / 1e9 for m in memory]
    best = min((t, i) for i, t in enumerate(time) if fits[i])[1] if any(fits) else None
    rows = range(len(configs))
    memory_ax.barh(rows, states, color="tab:blue", label="parameters, gradients, optimizer")
    memory_ax.barh(
        rows,
        [m - s for m, s in zip(memory, states, strict=True)],
        left=states,
        color="tab:orange",
        label="activations",
    )
    memory_ax.axvline(cluster.hbm / 1e9, color="tab:red", linestyle="--", label=f"{cluster.hbm / 1e9:.0f} GB")
    memory_ax.set_xlabel("GB per GPU")
    time_ax.barh(rows, compute, color="tab:green", label="compute and bubble")
    time_ax.barh(
        rows,
        [t - c for t, c in zip(time, compute, strict=True)],
        left=compute,
        color="tab:purple",
        label="communication",
    )
    time_ax.set_xlabel("seconds per step (nothing overlapped)")
    labels = [
        f"tp {c.tp} pp {c.pp} dp {c.dp}" + ("" if fits[i] else "  (does not fit)")
        for i, c in enumerate(configs)
    ]
    memory_ax.set_yticks(list(rows), labels, fontsize=8)
    if best is not None:
        memory_ax.get_yticklabels()[best].set_fontweight("bold")
    memory_ax.invert_yaxis()
    memory_ax.legend(fontsize=7, loc="lower right")
    time_ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(
        f"{model.name} on {configs[0].gpus} GPUs of {cluster.name}"
        + (
            f"; fastest that fits: tp {configs[best].tp} pp {configs[best].pp} dp {configs[best].dp}"
            if best is not None
            else "; none fits"
        ),
        fontsize=9,
    )
    fig.tight_layout()
    return fig


def layout_explorer(step_memory: Callable, step_time: Callable):
    """Controls for the model, the cluster, the number of GPUs, the global batch, the ZeRO stage
    and recomputation, over `plot_layouts`."""
    import ipywidgets as widgets

    model = widgets.Dropdown(options=list(MODELS), value=LLAMA_70B.name, description="model")
    cluster = widgets.Dropdown(options=list(CLUSTERS), description="cluster")
    gpus = widgets.Dropdown(options=[8 * 2**k for k in range(12)], value=64, description="GPUs")
    batch = widgets.Dropdown(options=[2**k for k in range(4, 13)], value=64, description="batch (seq)")
    zero = widgets.Dropdown(options=[0, 1, 2, 3], value=3, description="ZeRO stage")
    recompute = widgets.Checkbox(value=False, description="recompute")
    output = widgets.Output()

    def update(*_: object) -> None:
        chosen = MODELS[model.value]
        configs = layouts(chosen, gpus.value, batch.value, zero.value, recompute.value)
        redraw(output, lambda: plot_layouts(step_memory, step_time, chosen, CLUSTERS[cluster.value], configs))

    controls = [model, cluster, gpus, batch, zero, recompute]
    on_move(controls, update)
    update()
    return widgets.VBox([widgets.HBox(controls[:3]), widgets.HBox(controls[3:]), output])
