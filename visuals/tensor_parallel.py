"""Which rank holds which shard of a tensor-parallel MLP, drawn from the ranks' own layer objects."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

RANK_COLOURS = plt.get_cmap("tab10").colors
NOBODY = (0.85, 0.85, 0.85)


def _owners(full: torch.Tensor, shards: Sequence[torch.Tensor], dim: int) -> list[int]:
    """For each row (dim 0) or column (dim 1) of ``full``, the rank whose shard holds it (-1: none)."""
    owners = [-1] * full.shape[dim]
    for rank, shard in enumerate(shards):
        for j in range(shard.shape[dim]):
            piece = shard.select(dim, j)
            for i in range(full.shape[dim]):
                if (
                    owners[i] == -1
                    and piece.shape == full.select(dim, i).shape
                    and torch.equal(piece, full.select(dim, i))
                ):
                    owners[i] = rank
                    break
    return owners


def draw_tensor_parallel_shards(fc1: Any, fc2: Any, mlps: Sequence[Any], batch: int = 4) -> Figure:
    """Five panels: the input x (whole on every rank), fc1's weight (rows coloured by the rank that
    holds them), the hidden activation (each rank computes the features of its rows), fc2's weight
    (columns by rank), and the output (each rank's partial sum, added up by the all_reduce)."""
    w1, w2 = fc1.weight.detach(), fc2.weight.detach()
    rows = _owners(w1, [m.fc1.weight.detach() for m in mlps], 0)
    cols = _owners(w2, [m.fc2.weight.detach() for m in mlps], 1)
    world_size = len(mlps)
    cmap = ListedColormap([NOBODY, *RANK_COLOURS[:world_size], "black"])
    every = world_size + 1  # the colour meaning "every rank"
    panels = [
        ("x: the input\n(whole, on every rank)", np.full((batch, w1.shape[1]), every)),
        ("fc1.weight\n(rows by rank)", np.tile(np.array(rows)[:, None] + 1, (1, w1.shape[1]))),
        ("hidden = gelu(fc1(x))\n(features by rank)", np.tile(np.array(rows)[None, :] + 1, (batch, 1))),
        ("fc2.weight\n(columns by rank)", np.tile(np.array(cols)[None, :] + 1, (w2.shape[0], 1))),
        ("y: the output\n(all_reduce of the parts)", np.full((batch, w2.shape[0]), every)),
    ]
    fig, axes = plt.subplots(
        1, 5, figsize=(13, 3.2), gridspec_kw={"width_ratios": [p[1].shape[1] for p in panels]}
    )
    for ax, (title, grid) in zip(axes, panels, strict=True):
        ax.imshow(grid, cmap=cmap, vmin=0, vmax=world_size + 1, aspect="auto", interpolation="nearest")
        ax.set_title(title, fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
    handles = [plt.Rectangle((0, 0), 1, 1, color=RANK_COLOURS[r]) for r in range(world_size)]
    fig.legend(
        handles, [f"rank {r}" for r in range(world_size)], loc="lower center", ncol=world_size, fontsize=8
    )
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig
