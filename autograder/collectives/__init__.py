"""Checks for notebook 02 (collectives). Torch's own collectives are the reference every time.

Each check runs all its cases for one world size in a single `launch`, so a test cell takes a
fraction of a second per world size. When that launch fails, the cases run again one by one, so
that the message names the one that fails: the world size, the shape and the dtype. Every rank's
data is drawn inside the rank from a seed no other process knows, and the expected result is
computed here, in the checking process, from what each rank started with: a result can only be
right if the data really travelled between the ranks.

- `references`: what torch's collectives do, run as the references (`COLLECTIVES`,
  `collective_inputs`, `run_collective`, `real_outputs`).
- `cases`: running a check's cases on ranks, and the helpers the checks share.
- `predictions`: exercise 1, `check_predictions`.
- `all_reduce`: exercises 2 to 4, `check_all_reduce_by_parts`, `check_ring_chunks`,
  `check_ring_all_reduce`.
- `broadcast`: exercise 5, `check_tree_broadcast`.
- `evaluate`: exercise 6, `check_evaluate` and `sample_losses`.
"""

from .all_reduce import check_all_reduce_by_parts, check_ring_all_reduce, check_ring_chunks
from .broadcast import check_tree_broadcast
from .evaluate import check_evaluate, sample_losses
from .predictions import check_predictions
from .references import COLLECTIVES, ROOTED, SPLITTING, collective_inputs, real_outputs, run_collective

__all__ = [
    "COLLECTIVES",
    "ROOTED",
    "SPLITTING",
    "check_all_reduce_by_parts",
    "check_evaluate",
    "check_predictions",
    "check_ring_all_reduce",
    "check_ring_chunks",
    "check_tree_broadcast",
    "collective_inputs",
    "real_outputs",
    "run_collective",
    "sample_losses",
]
