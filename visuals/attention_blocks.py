"""Which blocks of causal attention each context-parallel rank computes: a grid of query chunks
(rows) against key chunks (columns), each block coloured by the rank that holds its queries, the
blocks above the diagonal (keys all in the queries' future) left blank."""

from __future__ import annotations

from collections.abc import Callable

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from autograder.context_parallel.layouts import contiguous_layout

from .redraw import on_move, redraw

RANK_COLOURS = plt.get_cmap("tab10").colors


def chunk_owners(layout: list, chunks: int) -> list[int]:
    """The rank holding each of ``chunks`` one-token chunks, from a layout of ``chunks`` tokens."""
    owners = [-1] * chunks
    for rank, spans in enumerate(layout):
        for a, b in spans:
            for position in range(a, b):
                owners[position] = rank
    return owners


def causal_work(owners: list[int], world_size: int) -> list[float]:
    """Blocks each rank computes under a causal mask, a diagonal block counting half."""
    work = [0.0] * world_size
    for i, rank in enumerate(owners):
        work[rank] += i + 0.5
    return work


def draw_attention_blocks(layouts: dict[str, list], world_size: int) -> Figure:
    """One grid per layout (name -> layout of 2 world_size one-token chunks)."""
    chunks = 2 * world_size
    fig, axes = plt.subplots(1, len(layouts), figsize=(4.2 * len(layouts), 4.6))
    axes = [axes] if len(layouts) == 1 else list(axes)
    for ax, (name, layout) in zip(axes, layouts.items(), strict=True):
        owners = chunk_owners(layout, chunks)
        for i, rank in enumerate(owners):
            colour = RANK_COLOURS[rank % len(RANK_COLOURS)] if rank >= 0 else "lightgrey"
            for j in range(i + 1):
                hatch = "//" if j == i else None  # the diagonal block: half of it is masked
                ax.add_patch(Rectangle((j, i), 1, 1, facecolor=colour, edgecolor="white", hatch=hatch))
        ax.set_xlim(0, chunks)
        ax.set_ylim(chunks, 0)
        ax.set_aspect("equal")
        ax.set_xticks([c + 0.5 for c in range(chunks)], range(chunks), fontsize=7)
        ax.set_yticks([c + 0.5 for c in range(chunks)], [f"{c} (rank {owners[c]})" for c in range(chunks)],
                      fontsize=7)  # fmt: skip
        ax.set_xlabel("key chunk")
        ax.set_ylabel("query chunk")
        work = causal_work(owners, world_size)
        ax.set_title(f"{name}\nblocks by rank: {[f'{w:g}' for w in work]}\nslowest / mean "
                     f"{max(work) / (sum(work) / world_size):.2f}", fontsize=8)  # fmt: skip
    fig.tight_layout()
    return fig


def attention_blocks_explorer(zigzag_layout: Callable, world_size: int = 3):
    """A slider over the number of CP ranks; the contiguous split against ``zigzag_layout``'s."""
    import ipywidgets as widgets

    ranks = widgets.IntSlider(value=world_size, min=1, max=8, description="CP ranks")
    output = widgets.Output()

    def update() -> None:
        n = ranks.value
        layouts = {
            "contiguous": contiguous_layout(2 * n, n),
            "your zig-zag": zigzag_layout(2 * n, n),
        }
        redraw(output, lambda: draw_attention_blocks(layouts, n))

    on_move([ranks], update)
    update()
    return widgets.VBox([ranks, output])
