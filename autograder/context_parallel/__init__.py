"""Checks for notebook 10 (long sequences and context parallelism).

- `layouts`: how a sequence is split over ranks (spans), the contiguous layout, ``take``, and the
  attention of a whole sequence every check compares with.
- `recording`: what a rank did while a check watched (messages and their waits, collectives,
  matmuls with their FLOPs and widths).
- `merge`: the online-softmax merge (`check_merge`).
- `ring`: ring attention forward and backward on ranks (`check_ring_attention`,
  `check_ring_backward`); `zigzag`: the zig-zag layout and its inverse (`check_zigzag`).
- `ulysses`: DeepSpeed-Ulysses on ranks, and the choice of a variant (`check_ulysses`,
  `check_cp_choice`).
- `planning`: CP on 08's mesh and the bytes of its all-gather (`check_cp_group`, `check_cp_bytes`),
  built on 08's planner.
"""

import launcher

from .layouts import contiguous_layout, take
from .merge import check_merge
from .planning import check_cp_bytes, check_cp_group
from .ring import check_ring_attention, check_ring_backward, ring_cases
from .ulysses import check_cp_choice, check_ulysses, ulysses_cases
from .zigzag import check_zigzag

launcher.preload("autograder.context_parallel")

__all__ = [
    "check_cp_bytes",
    "check_cp_choice",
    "check_cp_group",
    "check_merge",
    "check_ring_attention",
    "check_ring_backward",
    "check_ulysses",
    "check_zigzag",
    "contiguous_layout",
    "ring_cases",
    "take",
    "ulysses_cases",
]
