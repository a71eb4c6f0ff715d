"""Published training runs, as the planner's specs, with the step time each paper reports or implies.
 Narayanan et al. 2021 (Megatron-LM, arXiv 2104.04473) Table 1 gives TFLOP/s per GPU
counted by its equation 3, which includes the recomputed forward; the micro-batch size and the
virtual stages are those of the paper's launch script (NVIDIA/Megatron-LM, examples/sc21/
run_table_1.sh). Llama 3 (arXiv 2407.21783) Table 4 gives TFLOP/s per GPU; it does not state its
FLOP count, its micro-batch or its number of virtual stages: we count 6 FLOPs per parameter per
token and attention's causal half, 6 s h per layer per token (as ``planner.model_flops``: with
PaLM's 12 s h the 128K row disagrees with the other two by a third under any one model), take
micro-batches of one sequence, and V = ``LLAMA3_VIRTUAL_STAGES``.
"""

from __future__ import annotations

from . import planner

A100_CLUSTER = {  # Selene (Narayanan et al., section 5): DGX A100 80 GB, 8 HDR 200 Gb/s NICs a node
    "gpus_per_node": 8,
    "peak_flops": 312e12,
    "hbm": 80e9,
    "nvlink": 300e9,  # 600 GB/s both ways
    "network": 25e9,  # 200 Gb/s
}
H100_CLUSTER = {  # Llama 3, 3.3.1: 8 H100 80 GB a server, 400 Gb/s a GPU; 989 TFLOP/s bf16 dense
    "gpus_per_node": 8,
    "peak_flops": 989e12,
    "hbm": 80e9,
    "nvlink": 450e9,  # 900 GB/s both ways
    "network": 50e9,  # 400 Gb/s
}
LLAMA3_405B = {  # Table 3
    "layers": 126,
    "hidden": 16384,
    "heads": 128,
    "kv_heads": 8,
    "ffn_hidden": 53248,
    "seq": 8192,
    "vocab": 128256,
}
LLAMA3_VIRTUAL_STAGES = 4


def gpt(layers: int, hidden: int, heads: int, seq: int = 2048, vocab: int = 51200) -> dict:
    """A GPT-3-style model: multi-head attention, an MLP of 4 h, as Megatron-LM's runs."""
    return {
        "layers": layers,
        "hidden": hidden,
        "heads": heads,
        "kv_heads": heads,
        "ffn_hidden": 4 * hidden,
        "seq": seq,
        "vocab": vocab,
    }


def megatron_flops(batch: int, seq: int, layers: int, hidden: int, vocab: int) -> float:
    """Narayanan et al.'s equation 3: a step's FLOPs with full recomputation counted."""
    return 96 * batch * seq * layers * hidden**2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))


# billions of parameters, heads, hidden, layers, TP, PP, GPUs, batch, TFLOP/s a GPU, micro-batch, v
_TABLE_1 = [
    (1.7, 24, 2304, 24, 1, 1, 32, 512, 137, 16, 1),
    (3.6, 32, 3072, 30, 2, 1, 64, 512, 138, 16, 1),
    (7.5, 32, 4096, 36, 4, 1, 128, 512, 142, 16, 1),
    (18.4, 48, 6144, 40, 8, 1, 256, 1024, 135, 8, 1),
    (39.1, 64, 8192, 48, 8, 2, 512, 1536, 138, 4, 1),
    (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140, 2, 3),
    (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148, 2, 2),
    (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155, 1, 2),
    (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163, 1, 3),
    (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163, 1, 1),
]


def megatron_runs() -> list[dict]:
    """Table 1's ten runs: fp16, full recomputation, no sequence parallelism, no ZeRO."""
    runs = []
    for billions, heads, hidden, layers, tp, pp, gpus, batch, tflops, micro, v in _TABLE_1:
        spec = {
            **gpt(layers, hidden, heads),
            **A100_CLUSTER,
            "dp": gpus // (tp * pp),
            "tp": tp,
            "pp": pp,
            "cp": 1,
            "zero": 0,
            "global_batch": batch,
            "micro_batch": micro,
            "recompute": "full",
            "sequence_parallel": False,
            "virtual_stages": v,
        }
        seconds = megatron_flops(batch, 2048, layers, hidden, 51200) / (gpus * tflops * 1e12)
        runs.append(
            {
                "name": f"Megatron-LM {billions:g}B on {gpus} A100s",
                "source": "arXiv 2104.04473, Table 1",
                "spec": spec,
                "tflops": tflops,
                "seconds": seconds,
            }
        )
    return runs


def llama3_spec(tp: int, cp: int, pp: int, dp: int, seq: int) -> dict:
    """Llama 3 405B's layout: FSDP with fp32 gradients, sequence parallelism, no recomputation,
    16M tokens a step (2**24), sequences of one micro-batch each."""
    return {
        **LLAMA3_405B,
        **H100_CLUSTER,
        "seq": seq,
        "dp": dp,
        "tp": tp,
        "pp": pp,
        "cp": cp,
        "zero": 3,
        "global_batch": 2**24 // seq,
        "micro_batch": 1,
        "recompute": "none",
        "sequence_parallel": True,
        "virtual_stages": LLAMA3_VIRTUAL_STAGES,
    }


def llama3_runs() -> list[dict]:
    """Table 4: 8,192 and 16,384 GPUs at 8K tokens, and the 128K stage (CP 16) on 16,384."""
    rows = [(8, 1, 16, 64, 8192, 430), (8, 1, 16, 128, 8192, 400), (8, 16, 16, 8, 131072, 380)]
    runs = []
    for tp, cp, pp, dp, seq, tflops in rows:
        spec = llama3_spec(tp, cp, pp, dp, seq)
        gpus = tp * cp * pp * dp
        seconds = planner.model_flops(planner.read_spec(spec)) / (gpus * tflops * 1e12)
        runs.append(
            {
                "name": f"Llama 3 405B on {gpus:,} H100s, {seq:,} tokens",
                "source": "arXiv 2407.21783, Table 4",
                "spec": spec,
                "tflops": tflops,
                "seconds": seconds,
            }
        )
    return runs


def calibration_runs() -> list[dict]:
    """The runs the planner's constants are fitted on."""
    return megatron_runs() + llama3_runs()
