"""The inputs of the ring checks: each rank makes only its own rows, from a seed the check draws, so
that no rank can know another's; the checking process makes them all again for the reference."""

from __future__ import annotations

import torch

from ..checks import fresh_seed
from .layouts import Layout, contiguous_layout, reference_unshard, reference_zigzag_layout


def layout_of(case: dict) -> Layout:
    make = reference_zigzag_layout if case.get("layout") == "zigzag" else contiguous_layout
    return make(case["seq"], case["world_size"])


def with_seeds(cases: list[dict]) -> list[dict]:
    """Each case with a seed for each rank, drawn now (a notebook cannot know them in advance)."""
    return [{**case, "seeds": [fresh_seed() for _ in range(case["world_size"])]} for case in cases]


def rank_inputs(case: dict, rank: int, count: int = 3) -> list[torch.Tensor]:
    """Rank's own rows of q, k, v (and of the output's gradient, with ``count`` 4), float64,
    (heads, rows, dim); q times the case's ``scale``, to make scores large."""
    spans = layout_of(case)[rank]
    rows = sum(b - a for a, b in spans)
    gen = torch.Generator().manual_seed(case["seeds"][rank])
    shape = (case["heads"], rows, case["dim"])
    tensors = [torch.randn(shape, generator=gen, dtype=torch.float64) for _ in range(count)]
    tensors[0] = tensors[0] * case.get("scale", 1.0)
    return tensors


def whole_inputs(case: dict, count: int = 3) -> list[torch.Tensor]:
    """Every rank's rows put back at their positions: the whole sequence's q, k, v (, grad)."""
    layout = layout_of(case)
    per_rank = [rank_inputs(case, r, count) for r in range(case["world_size"])]
    return [reference_unshard([inputs[i] for inputs in per_rank], layout) for i in range(count)]


def describe(case: dict) -> str:
    return (
        f"{case['world_size']} rank{'s' if case['world_size'] != 1 else ''}, {case['seq']} tokens "
        f"({case.get('layout', 'contiguous')}), {case['heads']} heads of {case['dim']}, "
        f"{'causal' if case['causal'] else 'not causal'}"
        + (f", scores scaled by {case['scale']:g}" if case.get("scale", 1.0) != 1.0 else "")
    )
