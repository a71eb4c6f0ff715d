"""The checking tools every notebook's checks share, and that test cells call directly.

- `expect`: compare a student's answer with the right one (`expect_close`, `expect_equal`,
  `expect_tensor`, `expect_floats`; for worked problems, `expect_between`, the sanity range
  of a visible test, and `expect_worked_answer`, which tells a wrong answer of a hidden test
  where to look but never the answer; `expect_answer` and `expect_whole_number`, which explain), raising
  `CheckFailed` with a message that names the mistake where it can.
- `ranks`: run a function on ranks for a test (`run_ranks`), with inputs no other rank can know
  (`private_generator`), and compare what the ranks returned.
- `timing`: check code that times things (`FakeClock`, on the CPU or a stand-in GPU;
  `Timeline`).
"""

from .expect import (
    CheckFailed,
    allclose,
    close_floats,
    counted,
    expect_answer,
    expect_between,
    expect_close,
    expect_equal,
    expect_floats,
    expect_tensor,
    expect_whole_number,
    expect_worked_answer,
    fail,
    plain_number,
    same_value,
    tensors_equal,
)
from .expect import _short as _short
from .ranks import (
    expect_matches_reference,
    expect_same_on_every_rank,
    fresh_seed,
    private_generator,
    run_ranks,
)
from .timing import COPY_OPS, MATMUL_OPS, VIEWS, FakeClock, Timeline, describe_event, tensors_in, warm_up

__all__ = [
    "COPY_OPS",
    "MATMUL_OPS",
    "VIEWS",
    "CheckFailed",
    "FakeClock",
    "Timeline",
    "allclose",
    "close_floats",
    "counted",
    "describe_event",
    "expect_answer",
    "expect_between",
    "expect_close",
    "expect_equal",
    "expect_floats",
    "expect_matches_reference",
    "expect_same_on_every_rank",
    "expect_tensor",
    "expect_whole_number",
    "expect_worked_answer",
    "fail",
    "fresh_seed",
    "plain_number",
    "private_generator",
    "run_ranks",
    "same_value",
    "tensors_equal",
    "tensors_in",
    "warm_up",
]
