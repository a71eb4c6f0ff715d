"""Checks for notebook 07 (sharded data parallelism: ZeRO and FSDP).

The ranks' gradients and batches are drawn inside each rank from a seed no other process knows,
and returned with the results, so that the reference (plain AdamW or SGD in one process) is
computed here, in the checking process, from what the ranks really had. What each rank did is
measured as it happens: the collectives it issued and how many elements they carried (`CommLog`),
the bytes its optimizer keeps from one step to the next (every storage made during the
optimizer's construction and steps that is still alive afterwards), and, for FSDP, which layers'
whole weights were alive in the rank's memory after each tensor operation.

- `stages`: memory per device at each ZeRO stage, with each optimizer (`check_zero_memory`);
- `flat`: the pieces of a flat shard (`check_shard_pieces`);
- `zero`: the ZeRO-1 and ZeRO-2 optimizers (`check_zero_optimizer`);
- `fsdp`: the FSDP MLP (`check_fsdp`, `make_layers`, the mode that watches which layers are whole);
- `clipping`: clipping sharded gradients by their global norm (`check_clip_sharded`);
- `torch_fsdp`: training with torch's `fully_shard` (`check_fully_shard`), and what it sends in a
  step (`check_fully_shard_traffic`);
- `mixed`: `fully_shard` in mixed precision: the bytes it sends and holds, predicted
  (`check_fully_shard_bytes`) and measured (`measure_fully_shard_step`);
- `memory`: what `fully_shard` keeps in memory with AdamW and gradient accumulation, predicted
  (`check_fully_shard_memory`) and measured with torch's private `FSDPMemTracker`
  (`measure_fully_shard_memory`);
- `buckets` and `prefetch`: what the ZeRO-2 and FSDP checks watch during backward (the bytes alive
  at once; the order of all_gathers, their waits and the products with whole weights);
- `common`: what they share: the mode that watches what a rank keeps, the volumes its collectives
  carried, comparing parameters with the reference.

`fully_shard`, `full_tensor` and `gather_rows` live in `autograder.torch_compat`; they are named
here too for notebooks released before they moved. `make_batch`, `make_mlp` and `mse` are notebook
04's, which the setup cell imports from here.
"""

from __future__ import annotations

import launcher

from ..data_parallel import make_batch, make_mlp, mse
from ..torch_compat import full_tensor, fully_shard, gather_rows
from .buckets import PeakBytes
from .clipping import check_clip_sharded
from .flat import check_shard_pieces, flat_pieces_reference
from .fsdp import check_fsdp, make_layers
from .memory import check_fully_shard_memory, fully_shard_memory_reference, measure_fully_shard_memory
from .mixed import check_fully_shard_bytes, fully_shard_bytes_reference, measure_fully_shard_step
from .stages import check_zero_memory, zero_memory_reference
from .torch_fsdp import check_fully_shard, check_fully_shard_traffic, fully_shard_traffic_reference
from .zero import check_zero_optimizer

launcher.preload("autograder.sharded_data_parallel", "torch.distributed.fsdp")

__all__ = [
    "PeakBytes",
    "check_clip_sharded",
    "check_fsdp",
    "check_fully_shard",
    "check_fully_shard_bytes",
    "check_fully_shard_memory",
    "check_fully_shard_traffic",
    "check_shard_pieces",
    "check_zero_memory",
    "check_zero_optimizer",
    "flat_pieces_reference",
    "full_tensor",
    "fully_shard_bytes_reference",
    "fully_shard_memory_reference",
    "fully_shard_traffic_reference",
    "fully_shard",
    "gather_rows",
    "make_batch",
    "make_layers",
    "make_mlp",
    "measure_fully_shard_memory",
    "measure_fully_shard_step",
    "mse",
    "zero_memory_reference",
]
