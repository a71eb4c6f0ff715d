"""Checks for notebook 04 (data parallelism), and the model its exercises train.

Every check trains or differentiates the same small MLP on every rank and compares with one
process training on the whole batch, computed here, in the checking process. The ranks' data
and initial parameters are drawn from a seed each check picks afresh at random, so that no rank
can know another's without communicating. What each rank did is recorded as it happens (the
rows its model saw, the collectives it issued and when, the handles it waited on), so a right
result reached the wrong way fails too.

- `model`: the MLP, its data and loss (`make_mlp`, `make_batch`, `mse`), one process training
  on the whole batch (`train_alone`), and the comparison of a rank's parameters with it
  (notebook 07's checks use these too).
- `training`: data parallelism by hand and with torch's DDP (`check_data_parallel`), the loss
  of an uneven shard (`check_shard_loss`), one flat all_reduce (`check_flat_all_reduce`).
- `overlap`: all_reduces overlapped with backward (`overlap_model`, `check_overlap`), and
  gradient accumulation (`check_accumulation`).
"""

import launcher

from .model import NUM_DIM, make_batch, make_mlp, mse, train_alone
from .overlap import MICRO_ROWS, check_accumulation, check_overlap, overlap_model
from .training import check_data_parallel, check_flat_all_reduce, check_shard_loss

launcher.preload("autograder.data_parallel")

__all__ = [
    "MICRO_ROWS",
    "NUM_DIM",
    "check_accumulation",
    "check_data_parallel",
    "check_flat_all_reduce",
    "check_overlap",
    "check_shard_loss",
    "make_batch",
    "make_mlp",
    "mse",
    "overlap_model",
    "train_alone",
]
