"""Checks for notebook 04 (data parallelism), and the models its exercises train.

Every check trains or differentiates a small MLP on every rank and compares with one process
training on the whole batch, computed here, in the checking process. The ranks' data and initial
parameters are drawn from a seed each check picks afresh at random, so that no rank can know
another's without communicating. What each rank did is recorded as it happens (the rows it read,
the collectives it started, when and of what, the handles it waited on, what it allocated), so a
right result reached the wrong way fails too.

- `model`: the MLP, its data and loss (`make_mlp`, `make_batch`, `mse`), one process training
  on the whole batch (`train_alone`), and the comparison of a rank's parameters with it
  (notebook 07's checks use these too); `ShuffledMLP`, whose layers are listed in another order
  than they run.
- `training`: data parallelism by hand from a dataset each rank reads its share of
  (`check_data_parallel`), and the loss of an uneven shard (`check_shard_loss`).
- `flat`: gradients as views into one persistent flat buffer (`check_flat_gradients`).
- `overlap`: all_reduces overlapped with backward, per parameter and in buckets started in
  their order (`overlap_model`, `check_overlap`).
- `accumulation`: gradient accumulation that communicates during the last micro-batch's
  backward only (`check_accumulation`).
- `comm_hook`: a DDP communication hook that sends bfloat16 (`check_compression_hook`).
"""

import launcher

from .accumulation import MICRO_ROWS, check_accumulation
from .comm_hook import check_compression_hook
from .flat import check_flat_gradients
from .model import NUM_DIM, ShuffledMLP, make_batch, make_mlp, mse, train_alone
from .overlap import check_overlap, overlap_model
from .training import check_data_parallel, check_shard_loss

launcher.preload("autograder.data_parallel")

__all__ = [
    "MICRO_ROWS",
    "NUM_DIM",
    "ShuffledMLP",
    "check_accumulation",
    "check_compression_hook",
    "check_data_parallel",
    "check_flat_gradients",
    "check_overlap",
    "check_shard_loss",
    "make_batch",
    "make_mlp",
    "mse",
    "overlap_model",
    "train_alone",
]
