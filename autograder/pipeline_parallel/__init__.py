"""Checks for notebook 06 (pipeline parallelism), and what its exercises run on.

- `stage`: the model's layers (`make_layer`, `DIM`), a pipeline `Stage` that records what autograd
  runs on it, a `Pause` layer that only takes time, GPipe's order and orders written out by hand.
- `forward`: the lecture's forward pipeline (`check_pipeline_forward`);
- `schedules`: a schedule runner forward and backward (`check_run_schedule`,
  `check_run_written_orders`), and 1F1B (`check_one_f_one_b`, `check_one_f_one_b_run`).
- `bubble`: the visible checks of the bubble formulas, by their shape alone
  (`check_bubble_shape`, `check_interleaved_bubble_shape`).
- `costs`: the split of the layers (`check_split_layers`), the bubble simulated
  (`check_simulate`, `check_simulate_interleaved`, `interleaved_order`, `measured_bubble`), and
  activation checkpointing (`check_checkpointing`, `measure_checkpointing`).
- `interleaved`: interleaved stages on real ranks (`check_run_interleaved`) and the step's time
  predicted before it is measured (`check_step_predictions`).
- `megatron`: Megatron-LM's interleaved 1F1B (`check_interleaved_1f1b`,
  `check_interleaved_1f1b_run`) and the zero-bubble schedule (`zero_bubble_order`,
  `check_simulate_zero_bubble`), and torch's schedules' orders read as steps (`torch_order`).
"""

import launcher

from .bubble import check_bubble_shape, check_interleaved_bubble_shape
from .costs import (
    check_checkpointing,
    check_simulate,
    check_simulate_interleaved,
    check_split_layers,
    interleaved_order,
    measure_checkpointing,
    measured_bubble,
)
from .forward import check_pipeline_forward
from .interleaved import TIMED, check_run_interleaved, check_step_predictions
from .megatron import (
    check_interleaved_1f1b,
    check_interleaved_1f1b_run,
    check_simulate_zero_bubble,
    torch_order,
    zero_bubble_order,
)
from .schedules import (
    check_one_f_one_b,
    check_one_f_one_b_run,
    check_run_schedule,
    check_run_written_orders,
)
from .stage import DIM, WRITTEN_ORDERS, Pause, Stage, gpipe_order, make_layer, peak_alive

launcher.preload("autograder.pipeline_parallel")

__all__ = [
    "DIM",
    "TIMED",
    "WRITTEN_ORDERS",
    "Pause",
    "Stage",
    "check_bubble_shape",
    "check_checkpointing",
    "check_interleaved_1f1b",
    "check_interleaved_1f1b_run",
    "check_interleaved_bubble_shape",
    "check_one_f_one_b",
    "check_one_f_one_b_run",
    "check_pipeline_forward",
    "check_run_interleaved",
    "check_run_schedule",
    "check_run_written_orders",
    "check_simulate",
    "check_simulate_interleaved",
    "check_simulate_zero_bubble",
    "check_split_layers",
    "check_step_predictions",
    "gpipe_order",
    "interleaved_order",
    "make_layer",
    "measure_checkpointing",
    "measured_bubble",
    "peak_alive",
    "torch_order",
    "zero_bubble_order",
]
