"""Pictures of collectives: what each rank holds before and after, a ring all_reduce step by step,
and a broadcast down a binomial tree; with widgets to move through them."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import matplotlib.pyplot as plt
import torch
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Rectangle

RANK_COLOURS = plt.get_cmap("tab10").colors
MIXED = "#d9d9d9"  # a value summed from several ranks


def draw_collective(
    name: str, before: Sequence[torch.Tensor | None], after: Sequence[torch.Tensor | None]
) -> Figure:
    """One row per rank: the values it holds before and after ``name``.

    Each value is coloured by the rank it came from; a value summed over ranks is grey.
    """
    origin = _origins(before)
    summed = name in ("reduce", "all_reduce", "reduce_scatter") and len(before) > 1
    width = max(len(t) for t in [*before, *after] if t is not None)
    fig, axes = plt.subplots(1, 2, figsize=(1.6 + 0.55 * width * 2, 0.5 + 0.45 * len(before)))
    for ax, title, tensors in ((axes[0], "before", before), (axes[1], f"after {name}", after)):
        ax.set_title(title)
        for rank, tensor in enumerate(tensors):
            y = len(tensors) - 1 - rank
            ax.text(-0.3, y + 0.4, f"rank {rank}", ha="right", va="center")
            if tensor is None:
                ax.text(0.1, y + 0.4, "(nothing)", va="center", color="grey")
                continue
            for i, value in enumerate(tensor.tolist()):
                colour = MIXED if summed and tensors is after else origin.get(value, MIXED)
                ax.add_patch(Rectangle((i, y), 0.95, 0.8, facecolor=colour, alpha=0.55, edgecolor="black"))
                ax.text(i + 0.47, y + 0.4, f"{value:g}", ha="center", va="center", fontsize=9)
        ax.set_xlim(-2.2, width)
        ax.set_ylim(-0.2, len(tensors))
        ax.axis("off")
    fig.tight_layout()
    return fig


def _origins(before: Sequence[torch.Tensor | None]) -> dict[float, tuple]:
    """Value -> colour of the one rank that held it before (values held by several are left out)."""
    holders: dict[float, set[int]] = {}
    for rank, tensor in enumerate(before):
        for value in [] if tensor is None else tensor.tolist():
            holders.setdefault(value, set()).add(rank)
    return {v: RANK_COLOURS[min(r) % 10] for v, r in holders.items() if len(r) == 1}


def collective_explorer(
    run: Callable[[str, int, int], tuple[list, list]],
    collectives: Sequence[str],
    rooted: Sequence[str] = ("broadcast", "reduce", "gather", "scatter"),
    max_world_size: int = 4,
):
    """Pick a collective, a world size and (for ``rooted`` collectives) the root; shows
    ``run(name, world_size, root)``'s before and after. ``run`` really runs the collective, so
    each change takes a launch."""
    import ipywidgets as widgets
    from IPython.display import display

    choice = widgets.Dropdown(options=list(collectives), value="all_reduce", description="collective")
    size = widgets.IntSlider(
        value=min(4, max_world_size), min=1, max=max_world_size, description="world size"
    )
    root = widgets.IntSlider(value=0, min=0, max=size.value - 1, description="root", disabled=True)
    output = widgets.Output()

    def update(*_: object) -> None:
        root.max = size.value - 1
        root.disabled = choice.value not in rooted
        with output:
            output.clear_output(wait=True)
            before, after = run(choice.value, size.value, root.value)
            display(draw_collective(choice.value, before, after))
            plt.close("all")

    for widget in (choice, size, root):
        widget.observe(update, "value")
    update()
    return widgets.VBox([widgets.HBox([choice, size, root]), output])


# -- ring all_reduce ----------------------------------------------------------------------------


def ring_schedule(world_size: int) -> list[list[tuple[int, int]]]:
    """For each of the 2(p-1) steps, what each rank sends: [(chunk, to rank), ...] by rank.

    Reduce-scatter first (step s: rank r sends chunk (r - s) mod p, adding into its neighbour's),
    then all-gather (step s: rank r passes on chunk (r + 1 - s) mod p, which is complete).
    """
    p = world_size
    steps = [[((r - s) % p, (r + 1) % p) for r in range(p)] for s in range(p - 1)]
    steps += [[((r + 1 - s) % p, (r + 1) % p) for r in range(p)] for s in range(p - 1)]
    return steps


def ring_contents(world_size: int, upto: int) -> list[list[set[int]]]:
    """After ``upto`` steps: contents[r][c] is the set of ranks whose chunk c rank r has summed."""
    p = world_size
    contents = [[{r} for _ in range(p)] for r in range(p)]
    for s, sends in enumerate(ring_schedule(p)[:upto]):
        arriving = [(to, chunk, set(contents[r][chunk])) for r, (chunk, to) in enumerate(sends)]
        for to, chunk, parts in arriving:
            if s < p - 1:
                contents[to][chunk] |= parts  # reduce-scatter: add
            else:
                contents[to][chunk] = parts  # all-gather: copy
    return contents


def draw_ring_step(world_size: int, step: int) -> Figure:
    """Ranks on a circle, each with its p chunks shaded by how many ranks' data they sum;
    arrows show the chunk each rank sends at ``step`` (0-based; ``2(p-1)`` shows the end)."""
    p = world_size
    schedule = ring_schedule(p)
    contents = ring_contents(p, step)
    fig, ax = plt.subplots(figsize=(5.5, 5.5))
    centres = [(math.sin(2 * math.pi * r / p), math.cos(2 * math.pi * r / p)) for r in range(p)]
    for r, (x, y) in enumerate(centres):
        ax.text(x, y + 0.22, f"rank {r}", ha="center", fontsize=10)
        for c in range(p):
            share = len(contents[r][c]) / p
            ax.add_patch(
                Rectangle(
                    (x - 0.3 + 0.6 * c / p, y - 0.08),
                    0.6 / p * 0.92,
                    0.2,
                    facecolor=plt.get_cmap("Greens")(0.15 + 0.85 * share),
                    edgecolor="black",
                )
            )
            ax.text(x - 0.3 + 0.6 * (c + 0.46) / p, y + 0.02, str(c), ha="center", va="center", fontsize=8)
    if step < len(schedule):
        for r, (chunk, to) in enumerate(schedule[step]):
            if p > 1:
                (x0, y0), (x1, y1) = centres[r], centres[to]
                arrow = FancyArrowPatch(
                    (x0, y0 - 0.12),
                    (x1, y1 - 0.12),
                    connectionstyle="arc3,rad=-0.25",
                    arrowstyle="-|>",
                    mutation_scale=14,
                    color=RANK_COLOURS[r % 10],
                )
                ax.add_patch(arrow)
                ax.text(
                    (x0 + x1) / 2 * 1.25,
                    (y0 + y1) / 2 * 1.25 - 0.12,
                    f"chunk {chunk}",
                    ha="center",
                    fontsize=8,
                    color=RANK_COLOURS[r % 10],
                )
        phase = "reduce-scatter: add the chunk in" if step < p - 1 else "all-gather: copy the chunk"
        title = f"step {step + 1} of {len(schedule)} ({phase})"
    else:
        title = "done: every rank holds every chunk, summed over all ranks"
    ax.set_title(title, fontsize=10)
    ax.text(
        0,
        -1.5,
        "each rank's chunks 0..p-1: the darker, the more ranks' data it sums",
        ha="center",
        fontsize=8,
    )
    ax.set_xlim(-1.6, 1.6)
    ax.set_ylim(-1.6, 1.6)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig


def ring_explorer(max_world_size: int = 6):
    """Sliders for the world size and the step of a ring all_reduce."""
    import ipywidgets as widgets
    from IPython.display import display

    size = widgets.IntSlider(value=4, min=2, max=max_world_size, description="world size")
    step = widgets.IntSlider(value=0, min=0, max=2 * (size.value - 1), description="step")
    output = widgets.Output()

    def update(*_: object) -> None:
        step.max = 2 * (size.value - 1)  # the last position shows the finished all_reduce
        with output:
            output.clear_output(wait=True)
            display(draw_ring_step(size.value, step.value))
            plt.close("all")

    size.observe(update, "value")
    step.observe(update, "value")
    update()
    return widgets.VBox([widgets.HBox([size, step]), output])


# -- binomial tree broadcast --------------------------------------------------------------------


def tree_rounds(world_size: int, src: int) -> list[list[tuple[int, int]]]:
    """The sends of a binomial-tree broadcast from ``src``: for each round, [(from, to), ...]."""
    rounds, mask = [], 1
    while mask < world_size:
        rounds.append(
            [
                ((me + src) % world_size, (me + mask + src) % world_size)
                for me in range(mask)
                if me + mask < world_size
            ]
        )
        mask *= 2
    return rounds


def draw_tree_broadcast(world_size: int, src: int) -> Figure:
    """Columns are rounds; a rank's dot is filled once it has the data; arrows are the sends."""
    rounds = tree_rounds(world_size, src)
    fig, ax = plt.subplots(figsize=(1.8 + 1.6 * len(rounds), 0.6 + 0.45 * world_size))
    have = {src}
    for k in range(len(rounds) + 1):
        for rank in range(world_size):
            filled = rank in have
            ax.plot(
                k,
                -rank,
                "o",
                markersize=12,
                color=RANK_COLOURS[src % 10] if filled else "white",
                markeredgecolor="black",
            )
        if k < len(rounds):
            for a, b in rounds[k]:
                ax.annotate(
                    "", xy=(k + 1, -b), xytext=(k, -a), arrowprops={"arrowstyle": "-|>", "color": "black"}
                )
            have |= {b for _, b in rounds[k]}
    ax.set_yticks([-r for r in range(world_size)], [f"rank {r}" for r in range(world_size)])
    ax.set_xticks(range(len(rounds) + 1), ["start", *[f"round {k + 1}" for k in range(len(rounds))]])
    ax.set_title(f"broadcast from rank {src}: {len(rounds)} rounds for {world_size} ranks", fontsize=10)
    for side in ("top", "right", "left", "bottom"):
        ax.spines[side].set_visible(False)
    fig.tight_layout()
    return fig
