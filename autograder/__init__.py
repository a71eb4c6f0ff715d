"""What the notebooks' test cells call: checks with messages a student can act on.

- `checks`: the tools every check shares: compare numbers and tensors (`expect_close`,
  `expect_equal`, `expect_tensor`), and ranks' results with each other and with a
  single-process reference (`expect_same_on_every_rank`, `expect_matches_reference`); run a
  function on ranks for a test (`run_ranks`); a `FakeClock` for checking timing code, on the CPU
  or on a stand-in GPU; `expect_answer` and `expect_whole_number` for worked problems, and
  `expect_worked_answer` for their hidden tests (it never shows the answer).
- `comm`: `CommLog`, which records the collectives and messages a rank issues (and finds those
  run out of its sight).
- one module or package of checks per notebook: `collectives` (02), `benchmarking` (03),
  `data_parallel` (04), `tensor_parallel` (05), `pipeline_parallel` (06),
  `sharded_data_parallel` (07), `combined_parallelism` (08), `expert_parallel` (09),
  `context_parallel` (10).
- `torch_compat`: the torch-version workarounds notebooks and checks share (torch 2.13's names
  for two collectives, torch's `fully_shard` and `full_tensor` made to work on older Gloo).

It imports the launcher, and nothing of the instructors' grading machinery (grading/), which
students do not have.
"""

from .checks import (
    COPY_OPS,
    MATMUL_OPS,
    CheckFailed,
    FakeClock,
    expect_answer,
    expect_between,
    expect_close,
    expect_equal,
    expect_matches_reference,
    expect_same_on_every_rank,
    expect_tensor,
    expect_whole_number,
    expect_worked_answer,
    fail,
    run_ranks,
)
from .comm import CommLog

__all__ = [
    "COPY_OPS",
    "MATMUL_OPS",
    "CheckFailed",
    "CommLog",
    "FakeClock",
    "expect_answer",
    "expect_between",
    "expect_close",
    "expect_equal",
    "expect_matches_reference",
    "expect_same_on_every_rank",
    "expect_tensor",
    "expect_whole_number",
    "expect_worked_answer",
    "fail",
    "run_ranks",
]
