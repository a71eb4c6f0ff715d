"""Checks for notebook 03 (benchmarking collectives).

- `calls`: the call that runs one collective (`check_collective_call`);
- `benchmark`: a benchmark, graded on what it does in order and what it returns, never on speed
  (`check_benchmark`);
- `sweep`: a sweep over message sizes (`check_sweep`);
- `answers`: a choice among statements (`check_choices`), and predictions that may rest on an
  earlier answer of the student's (`expect_prediction`);
- `standin` and `recording`: what they share, a stand-in GPU that tells which tensors would be on
  the device, and a record of each rank's operations.

The values a test expects (sizes, formulas, answers) come from the test cell, so that nothing here
gives an exercise's answer away.
"""

import launcher

from .answers import (
    busbw_from_your_bandwidths,
    check_choices,
    chosen_letters,
    expect_prediction,
)
from .benchmark import check_benchmark
from .calls import check_collective_call
from .sweep import SteadyTimer, check_sweep

# The ranks run this package's functions: have the fork server import it once, for every rank.
launcher.preload("autograder.benchmarking")

__all__ = [
    "SteadyTimer",
    "busbw_from_your_bandwidths",
    "check_benchmark",
    "check_choices",
    "check_collective_call",
    "check_sweep",
    "chosen_letters",
    "expect_prediction",
]
