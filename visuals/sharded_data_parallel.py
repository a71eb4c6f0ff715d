"""Pictures of sharded data parallelism: a memory calculator over model size, devices, ZeRO
stage and optimizer, and a flat buffer of parameters cut into ranks' shards. Both draw from the notebook's own
functions, passed in: the memory per device from ``zero_memory``, the shards from ``shard_pieces``."""

from __future__ import annotations

from collections.abc import Callable

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from .redraw import on_move

STAGE_NAMES = ["DDP (no sharding)", "ZeRO-1", "ZeRO-2", "ZeRO-3 / FSDP"]
OPTIMIZERS = {"adamw": "AdamW", "sgd_momentum": "SGD with momentum", "sgd": "SGD"}
PARAMETER_COLOURS = plt.get_cmap("tab10").colors


def plot_zero_memory(
    zero_memory: Callable,
    psi: float,
    n: int,
    stage: int,
    optimizer: str = "adamw",
    device_bytes: float = 80e9,
) -> Figure:
    """Left: memory per device of each stage for ``psi`` parameters on ``n`` devices trained with
    ``optimizer``; right: the same against the number of devices; a dashed line at the device's
    memory."""
    fig, (bars, curves) = plt.subplots(1, 2, figsize=(10, 3.2))
    values = [zero_memory(psi, n, s, optimizer) / 1e9 for s in range(4)]
    colours = ["tab:blue" if s == stage else "tab:gray" for s in range(4)]
    bars.bar(range(4), values, color=colours)
    bars.axhline(
        device_bytes / 1e9, color="tab:red", linestyle="--", label=f"{device_bytes / 1e9:.0f} GB device"
    )
    bars.set_xticks(range(4), STAGE_NAMES, fontsize=8)
    bars.set_ylabel("GB per device")
    bars.set_title(f"{psi / 1e9:g}B parameters on {n} devices, {OPTIMIZERS[optimizer]}", fontsize=9)
    bars.legend(fontsize=8)
    devices = [2**k for k in range(0, 11)]
    for s in range(4):
        curves.plot(
            devices,
            [zero_memory(psi, d, s, optimizer) / 1e9 for d in devices],
            marker="o",
            markersize=3,
            linewidth=2.5 if s == stage else 1,
            label=STAGE_NAMES[s],
        )
    curves.axhline(device_bytes / 1e9, color="tab:red", linestyle="--")
    curves.axvline(n, color="black", linestyle=":")
    curves.set_xscale("log", base=2)
    curves.set_yscale("log")
    curves.set_xlabel("devices n")
    curves.set_ylabel("GB per device")
    curves.legend(fontsize=7)
    fig.tight_layout()
    return fig


def zero_memory_explorer(zero_memory: Callable):
    """Sliders for the model size and the number of devices, and menus for the stage and the
    optimizer, over `plot_zero_memory`, with a line that says whether the states fit on an 80 GB
    GPU."""
    import ipywidgets as widgets
    from IPython.display import display

    psi = widgets.FloatLogSlider(
        value=7e9, base=10, min=8, max=12, description="parameters", readout_format=".2g"
    )
    devices = widgets.IntSlider(value=8, min=1, max=1024, description="devices n")
    stage = widgets.Dropdown(
        options=list(zip(STAGE_NAMES, range(4), strict=True)), value=3, description="stage"
    )
    optimizer = widgets.Dropdown(
        options=[(name, key) for key, name in OPTIMIZERS.items()], value="adamw", description="optimizer"
    )
    output = widgets.Output()

    def update(*_: object) -> None:
        need = zero_memory(psi.value, devices.value, stage.value, optimizer.value)
        with output:
            output.clear_output(wait=True)
            verdict = "fits" if need <= 80e9 else "does not fit"
            print(
                f"{STAGE_NAMES[stage.value]}: {need / 1e9:,.1f} GB per device for parameters, gradients and "
                f"{OPTIMIZERS[optimizer.value]}'s state: {verdict} on an 80 GB H100, before a single "
                "activation."
            )
            fig = plot_zero_memory(zero_memory, psi.value, devices.value, stage.value, optimizer.value)
            display(fig)
            plt.close(fig)

    on_move([psi, devices, stage, optimizer], update)
    update()
    return widgets.VBox([widgets.HBox([psi, devices]), widgets.HBox([stage, optimizer]), output])


def draw_flat_shards(numels: list[int], world_size: int, shard_pieces: Callable) -> Figure:
    """The parameters laid end to end (top row) and, below it, each rank's shard, its pieces
    coloured by the parameter they come from, the padding hatched."""
    fig, ax = plt.subplots(figsize=(9, 0.5 * world_size + 1.2))
    start = 0
    for i, n in enumerate(numels):
        colour = PARAMETER_COLOURS[i % len(PARAMETER_COLOURS)]
        ax.barh(0, n, left=start, color=colour, edgecolor="white")
        ax.text(start + n / 2, 0, f"p{i}", ha="center", va="center", fontsize=8)
        start += n
    for rank in range(world_size):
        shard, pieces = shard_pieces(numels, world_size, rank)
        low = rank * shard
        ax.barh(rank + 1, shard, left=low, color="white", edgecolor="black", hatch="//")
        for i, _, offset, length in pieces:
            colour = PARAMETER_COLOURS[i % len(PARAMETER_COLOURS)]
            ax.barh(rank + 1, length, left=low + offset, color=colour, edgecolor="white")
    ax.set_yticks(range(world_size + 1), ["parameters"] + [f"rank {r}" for r in range(world_size)])
    ax.invert_yaxis()
    ax.set_xlabel("position in the flat buffer (elements); hatched: padding")
    ax.set_title(f"{sum(numels)} elements in {len(numels)} tensors, {world_size} shards", fontsize=9)
    fig.tight_layout()
    return fig
