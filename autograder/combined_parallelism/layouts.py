"""The models, clusters and layouts that notebook 08's planner describes (data only: what to
compute from them is the notebook's exercise). Figures and where they come from are in the notebook."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Model:
    """A GPT-style transformer: ``layers`` blocks of width ``hidden`` with ``heads`` attention
    heads, sequences of ``seq`` tokens, a vocabulary of ``vocab``."""

    name: str
    layers: int
    hidden: int
    heads: int
    seq: int
    vocab: int

    @property
    def params(self) -> int:
        """12 h^2 a layer (attention 4 h^2, an MLP of 4h: 8 h^2), plus the input embedding and
        the output layer, untied (V h each). Biases and norms are left out."""
        return 12 * self.layers * self.hidden**2 + 2 * self.vocab * self.hidden


@dataclass(frozen=True)
class Cluster:
    """Nodes of ``gpus_per_node`` GPUs, each with ``hbm`` bytes, ``peak_flops`` dense bf16 FLOP/s,
    ``nvlink`` bytes/s one way to the others in its node and ``network`` bytes/s one way to other nodes."""

    name: str
    gpus_per_node: int
    hbm: float
    peak_flops: float
    nvlink: float
    network: float


@dataclass(frozen=True)
class Config:
    """A layout: ``dp`` x ``tp`` x ``pp`` GPUs (TP innermost, then PP, then DP); ZeRO stage
    ``zero`` over the dp axis; each replica's step is ``micro_batches`` micro-batches of
    ``micro_batch`` sequences; full activation ``recompute``; Megatron's ``sequence_parallel``."""

    dp: int
    tp: int
    pp: int
    zero: int = 0
    micro_batch: int = 1
    micro_batches: int = 1
    recompute: bool = False
    sequence_parallel: bool = False

    @property
    def gpus(self) -> int:
        return self.dp * self.tp * self.pp


H100_NODES = Cluster("H100 nodes", 8, 80e9, 989e12, 450e9, 50e9)
A100_NODES = Cluster("A100 nodes", 8, 80e9, 312e12, 300e9, 25e9)
LLAMA3_405B = Model("Llama 3 405B", 126, 16384, 128, 8192, 128256)
LLAMA_70B = Model("a 70B Llama", 80, 8192, 64, 4096, 128256)
MEGATRON_1T = Model("Megatron-LM 1T", 128, 25600, 160, 2048, 51200)
GPT_13B = Model("a 13B GPT", 40, 5120, 40, 2048, 51200)
