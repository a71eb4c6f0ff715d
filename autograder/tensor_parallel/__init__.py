"""Checks for notebook 05 (tensor parallelism).

Inside each rank, the checks draw that rank's shards of the weights (and, where the input is
split, its slice of the input) at random from a generator no other process can reproduce, keep a
private copy, and hand the student's code only the shards: no rank can compute the others' part
without communicating, and no full weight exists in a rank for code to find. Where the code is
given a whole ``nn.Linear``, every entry outside the rank's shard is NaN. What is replicated by
design (the input of a layer, a row-parallel layer's bias, the targets) comes from a seed each
check draws afresh. The ranks return their private copies; the full layers are assembled here,
in the checking process, and their outputs and gradients are the reference.

What each rank sends is recorded as well (with torch's CommDebugMode and a dispatch mode beside
it, through `CommLog`): which collectives, forward and backward apart, and how many elements
each carried, so that a collective that carries the wrong thing (whole weights, padded logits)
fails even when the result is right.

- `shards`: the sizes (`DIM`, `HIDDEN`), the inputs every rank holds by design, a rank's shards
  of Megatron's two layers, and the checks of a rank's result, collectives and their sizes.
- `layers`: the lecture's all_gather MLP with its backward (`check_allgather_mlp`), Megatron's
  column- and row-parallel layers and their MLP (`check_column_parallel`, `check_row_parallel`,
  `check_tensor_parallel_mlp`), each shard checked to hold its own storage, and the operators f
  and g on their own (`check_parallel_operators`).
- `attention`: attention split by heads (`reference_attention`,
  `check_tensor_parallel_attention`).
- `block`: sequence parallelism, a LayerNorm and MLP block split by tokens and by features
  (`check_sequence_parallel_block`), its gradients included, and what each rank keeps for its
  backward pass: only its own tokens of fc1's input, gathered again in backward.
- `kept`: what a rank still holds when its forward pass has returned (`KeptAfterForward`), and
  whether any of it holds the other ranks' tokens.
- `sequence`: the cross-entropy over a vocabulary split across the ranks
  (`check_vocab_parallel_cross_entropy`), with logits far apart and targets on shard boundaries.
- `traffic`: how the byte counts of exercise 6 grow with the tokens, the width, the bytes a value
  and the GPUs, and how they compare (`check_mlp_bytes_scaling`, `check_allgather_bytes_scaling`),
  printing only the student's own numbers.
"""

import launcher

from .attention import ATTENTION_DIM, HEADS, check_tensor_parallel_attention, reference_attention
from .block import SEQUENCE, check_sequence_parallel_block
from .layers import (
    check_allgather_mlp,
    check_column_parallel,
    check_parallel_operators,
    check_row_parallel,
    check_tensor_parallel_mlp,
)
from .sequence import ROWS, VOCAB, check_vocab_parallel_cross_entropy
from .shards import DIM, HIDDEN
from .traffic import check_allgather_bytes_scaling, check_mlp_bytes_scaling

launcher.preload("autograder.tensor_parallel")

__all__ = [
    "ATTENTION_DIM",
    "DIM",
    "HEADS",
    "HIDDEN",
    "ROWS",
    "SEQUENCE",
    "VOCAB",
    "check_allgather_bytes_scaling",
    "check_allgather_mlp",
    "check_column_parallel",
    "check_mlp_bytes_scaling",
    "check_parallel_operators",
    "check_row_parallel",
    "check_sequence_parallel_block",
    "check_tensor_parallel_attention",
    "check_tensor_parallel_mlp",
    "check_vocab_parallel_cross_entropy",
    "reference_attention",
]
