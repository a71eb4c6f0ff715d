"""The course's reference planner: the memory per GPU and the time of one training step of a
transformer on a cluster, for a layout of tensor, context, pipeline and data parallelism.

    >>> from autograder.combined_parallelism.planner import predict
    >>> predict({**LLAMA3_405B, **H100_CLUSTER, "dp": 128, "tp": 8, "pp": 16, ...})["step_seconds"]

``spec`` is one flat dict (the keys are in ``MODEL_KEYS``, ``CLUSTER_KEYS`` and ``LAYOUT_KEYS``,
optional ones in ``OPTIONAL``). Every term is one that notebooks 03-07 teach:

- states by ZeRO stage (07) and by how gradients are accumulated over micro-batches: bf16 and, for
  ZeRO-2 and 3, reduce_scattered every micro-batch (FSDP's default), or fp32 accumulators kept whole
  and reduced once a step (Megatron-LM, Llama 3, torch's pipelining with FSDP);
- activations per Korthikanti et al. (arXiv 2205.05198, section 4), for grouped-query attention
  and gated MLPs too, times the micro-batches 1F1B or interleaved 1F1B keeps in flight (06);
- compute at an achieved fraction of peak, and the memory-bound work (norms, activations,
  attention scores without FlashAttention) at the GPU's memory bandwidth;
- each axis's bytes as the schedule sends them (05, 06, 07), on the link its ring crosses (03, 04:
  NVLink in a node; across nodes, one NIC per member of the group in each node);
- what overlaps: a step-end reduction with the last micro-batch's backward, a step-start gather
  with the first forward, FSDP's per-micro-batch collectives with that micro-batch's compute; TP,
  CP and pipeline messages are on the critical path.

The fitted constants (``EFFICIENCY`` for each GPU, ``LINK_EFFICIENCY``, ``MEMORY_PASSES``) come from
``benchmarks/planner_calibration.py``, which fits them on Narayanan et al. 2021 (arXiv 2104.04473)
Table 1 and Llama 3 (arXiv 2407.21783) Table 4 and prints the error on each run.
"""

from __future__ import annotations

import math

MODEL_KEYS = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "seq", "vocab")
CLUSTER_KEYS = ("gpus_per_node", "peak_flops", "hbm", "nvlink", "network")
LAYOUT_KEYS = (
    "dp", "tp", "pp", "cp", "zero", "global_batch", "micro_batch", "recompute", "sequence_parallel",
    "virtual_stages",
)  # fmt: skip
OPTIONAL = {
    "gated_mlp": "a SwiGLU-style MLP (three matrices); default: ffn_hidden != 4 * hidden",
    "tied_embeddings": "the output layer shares the input embedding's matrix; default False",
    "grad_accumulation": '"fp32" (accumulators kept whole, reduced once a step; the default) or "bf16"',
    "flash_attention": "attention never stores the s x s scores; default: on GPUs past 500 TFLOP/s",
    "hbm_bandwidth": "bytes/s of the GPU's memory; default: the A100's or the H100's, by peak",
    "efficiency": "the fraction of peak the matmuls reach; default: the calibrated one, by peak",
    "link_efficiency": "the fraction of a link's bandwidth a ring collective reaches; default: fitted",
    "memory_passes": "times a layer's saved activations move through HBM; default: fitted",
}
RECOMPUTE = ("none", "selective", "full")

# Fitted by benchmarks/planner_calibration.py (see its output for the error on each run).
EFFICIENCY = {"A100": 0.70, "H100": 0.60}  # the fraction of the bf16 dense peak matmuls reach
LINK_EFFICIENCY = 0.75  # the fraction of a link's bandwidth a ring collective reaches (busbw / link)
MEMORY_PASSES = 8.0  # times a layer's saved activations move through HBM in forward and backward
# Datasheets: A100 80 GB SXM 2.04 TB/s, 312 TFLOP/s; H100 SXM 3.35 TB/s, 989 TFLOP/s.
HBM_BANDWIDTH = {"A100": 2.04e12, "H100": 3.35e12}
ORDER = ("tp", "cp", "pp", "dp")  # innermost first: Llama 3's order, and section 1's


def generation(spec: dict) -> str:
    """The calibrated GPU nearest this one by peak: "A100" (312 TFLOP/s) or "H100" (989)."""
    return "A100" if spec["peak_flops"] < 500e12 else "H100"


def read_spec(spec: dict) -> dict:
    """``spec`` with its optional keys filled in, or a ValueError that says what is wrong."""
    if not isinstance(spec, dict):
        raise ValueError(f"a spec is a dict of the keys {MODEL_KEYS + CLUSTER_KEYS + LAYOUT_KEYS}")
    missing = [k for k in MODEL_KEYS + CLUSTER_KEYS + LAYOUT_KEYS if k not in spec]
    if missing:
        raise ValueError(f"the spec has no {', '.join(missing)}: the planner needs every one of them")
    unknown = set(spec) - set(MODEL_KEYS + CLUSTER_KEYS + LAYOUT_KEYS) - set(OPTIONAL)
    if unknown:
        raise ValueError(f"the planner does not know {sorted(unknown)}; optional keys: {sorted(OPTIONAL)}")
    s = dict(spec)
    for key in ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "seq", "vocab", "gpus_per_node"):
        _whole(s, key, 1)
    for key in ("dp", "tp", "pp", "cp", "global_batch", "micro_batch", "virtual_stages"):
        _whole(s, key, 1)
    _whole(s, "zero", 0)
    for key in ("peak_flops", "hbm", "nvlink", "network"):
        if not isinstance(s[key], (int, float)) or not s[key] > 0:
            raise ValueError(f"{key} must be a positive number, got {s[key]!r}")
    if s["zero"] > 3:
        raise ValueError(f"zero is a ZeRO stage, 0 to 3, got {s['zero']}")
    if s["recompute"] not in RECOMPUTE:
        raise ValueError(f"recompute is one of {RECOMPUTE}, got {s['recompute']!r}")
    if s["heads"] % s["kv_heads"] or s["hidden"] % s["heads"]:
        raise ValueError("heads must divide hidden, and kv_heads must divide heads")
    if s["heads"] % s["tp"]:
        raise ValueError(f"tp = {s['tp']} must divide the {s['heads']} heads: each TP rank holds whole heads")
    if s["global_batch"] % (s["dp"] * s["micro_batch"]):
        raise ValueError(
            f"global_batch = {s['global_batch']} sequences do not split into dp = {s['dp']} replicas of "
            f"micro-batches of {s['micro_batch']}: make it a multiple of {s['dp'] * s['micro_batch']}"
        )
    if s["seq"] % (2 * s["cp"]) and s["cp"] > 1:
        raise ValueError(f"seq = {s['seq']} must split into 2 * cp = {2 * s['cp']} chunks (zig-zag)")
    if -(-s["layers"] // s["pp"]) < s["virtual_stages"]:
        raise ValueError(
            f"{s['layers']} layers over {s['pp']} stages cannot fill {s['virtual_stages']} chunks each"
        )
    s.setdefault("gated_mlp", s["ffn_hidden"] != 4 * s["hidden"])
    s.setdefault("tied_embeddings", False)
    s.setdefault("grad_accumulation", "fp32")
    s.setdefault("flash_attention", generation(s) == "H100")
    s.setdefault("hbm_bandwidth", HBM_BANDWIDTH[generation(s)])
    s.setdefault("efficiency", EFFICIENCY[generation(s)])
    s.setdefault("link_efficiency", LINK_EFFICIENCY)
    s.setdefault("memory_passes", MEMORY_PASSES)
    if s["grad_accumulation"] not in ("fp32", "bf16"):
        raise ValueError(f'grad_accumulation is "fp32" or "bf16", got {s["grad_accumulation"]!r}')
    if not 0 < s["efficiency"] <= 1:
        raise ValueError(f"efficiency is a fraction of peak, in (0, 1], got {s['efficiency']!r}")
    return s


def _whole(s: dict, key: str, least: int) -> None:
    if isinstance(s[key], bool) or not isinstance(s[key], int) or s[key] < least:
        raise ValueError(f"{key} must be a whole number of at least {least}, got {s[key]!r}")


# --- the model's shape -------------------------------------------------------------------------


def layer_params(s: dict) -> int:
    """One block's matrices: Q and the output projection h x h each, K and V h x (h kv/heads) each,
    and the MLP's two (three if gated) h x ffn_hidden matrices. Norms and biases are left out."""
    h = s["hidden"]
    kv = h * s["kv_heads"] // s["heads"]
    return 2 * h * h + 2 * h * kv + (3 if s["gated_mlp"] else 2) * h * s["ffn_hidden"]


def params(s: dict) -> int:
    """Psi: every block, the input embedding and (unless tied) the output layer."""
    return s["layers"] * layer_params(s) + (1 if s["tied_embeddings"] else 2) * s["vocab"] * s["hidden"]


def stage_layers(s: dict) -> list[int]:
    """Layers on each pipeline stage, as even as can be; the stages in the middle take the extra
    ones, since the first holds the embedding and the last the output layer (Llama 3, 3.3.2)."""
    p, layers = s["pp"], s["layers"]
    counts = [layers // p] * p
    middle_first = list(range(1, p - 1)) + [0, p - 1] if p > 2 else list(range(p))
    for stage in middle_first[: layers % p]:
        counts[stage] += 1
    return counts


def tokens(s: dict) -> int:
    """Tokens of one micro-batch on one GPU: its sequences, each split over the CP ranks."""
    return s["seq"] // s["cp"] * s["micro_batch"]


def gpus(s: dict) -> int:
    return s["dp"] * s["tp"] * s["pp"] * s["cp"]


def stage_params(s: dict, stage: int) -> float:
    """The parameters one GPU of ``stage`` holds: its layers and end layers, split over TP."""
    count = stage_layers(s)[stage] * layer_params(s)
    embedding = s["vocab"] * s["hidden"]
    if stage == 0:
        count += embedding
    if stage == s["pp"] - 1 and not (s["tied_embeddings"] and s["pp"] == 1):
        count += embedding
    return count / s["tp"]


def busiest_params(s: dict) -> float:
    """The parameters one GPU of the stage holding the most keeps."""
    return max(stage_params(s, stage) for stage in range(s["pp"]))


# --- memory ------------------------------------------------------------------------------------


def state_bytes(psi: float, dp: int, zero: int, grad_accumulation: str) -> float:
    """Parameters, gradients and AdamW's state of ``psi`` parameters, in mixed precision.

    bf16: 2 bytes of parameters, 2 of gradients, 12 of fp32 master copy and moments, each sharded
    over the dp replicas from its ZeRO stage on (07's table). fp32: the gradients are fp32
    accumulators that every rank keeps whole until the step's one reduction (4 bytes, never
    sharded), and ZeRO-3 keeps the gathered parameters whole through the step, as Llama 3 does."""
    if grad_accumulation == "fp32":
        return 2 * psi + 4 * psi + 12 * psi / (dp if zero >= 1 else 1)
    return (
        2 * psi / (dp if zero >= 3 else 1)
        + 2 * psi / (dp if zero >= 2 else 1)
        + 12 * psi / (dp if zero >= 1 else 1)
    )


def split_activation(s: dict) -> float:
    """Of a layer's saved activations, in units of s b h bytes, the part TP splits: Q 2, K and V
    4 kv/heads, the output projection's input 2, the MLP's matrices' outputs (4 ffn/h, or 6 ffn/h
    gated: gate, up and their product). For GPT's shapes, Korthikanti's 24."""
    ratio = s["ffn_hidden"] / s["hidden"]
    return 4 + 4 * s["kv_heads"] / s["heads"] + (6 if s["gated_mlp"] else 4) * ratio


def layer_activation_bytes(s: dict, recompute: str | None = None) -> float:
    """The bytes one layer keeps for one micro-batch until its backward (Korthikanti et al.,
    section 4): 10 s b h for norms, inputs and dropout masks, which only sequence parallelism splits;
    the part above, split over TP; 5 a s / h s b h of attention scores unless FlashAttention. Full
    recomputation keeps the layer's input, 2 s b h; selective, everything but the scores."""
    recompute = s["recompute"] if recompute is None else recompute
    t, sp = s["tp"], s["sequence_parallel"]
    sbh = tokens(s) * s["hidden"]
    if recompute == "full":
        return 2 * sbh / (t if sp else 1)
    kept = (10 / t if sp else 10) + split_activation(s) / t
    if recompute == "none" and not s["flash_attention"]:
        kept += 5 * s["heads"] * s["seq"] / (s["hidden"] * t)
    return sbh * kept


def in_flight_layers(s: dict) -> float:
    """Layers' worth of one micro-batch's activations the first stage holds at its peak: under 1F1B,
    min(pp, m) micro-batches of its layers; interleaved over v chunks, Megatron's warm-up of
    2(pp - 1) + (v - 1) pp chunks plus one, each a v-th of its layers (Korthikanti: L(1 + (p-1)/(pv)))."""
    p, v = s["pp"], s["virtual_stages"]
    m = micro_batches(s)
    layers = stage_layers(s)[0]
    if v == 1:
        return min(p, m) * layers
    return min(m * v, 2 * (p - 1) + (v - 1) * p + 1) * layers / v


def memory_parts(s: dict) -> dict[str, float]:
    """Bytes on one GPU of the first stage (the most activations) or of the last (its logits), the
    larger of the two: states, activations, and what ZeRO-3 gathers or the output layer makes."""
    s = read_spec(s)
    parts = []
    for stage in sorted({0, s["pp"] - 1}):
        psi = stage_params(s, stage)
        acts = layer_activation_bytes(s) * (in_flight_layers(s) if stage == 0 else stage_layers(s)[stage])
        extra = 0.0
        if s["zero"] == 3 and s["grad_accumulation"] == "bf16":
            extra += 2 * 2 * layer_params(s) / s["tp"]  # the unit in use and the one prefetched
        if stage == s["pp"] - 1:  # fp32 logits and their gradient, over the TP shards of the vocabulary
            extra += 2 * 4 * tokens(s) * s["vocab"] / s["tp"]
        parts.append(
            {
                "states": state_bytes(psi, s["dp"], s["zero"], s["grad_accumulation"]),
                "activations": acts,
                "other": extra,
            }
        )
    return max(parts, key=lambda p: sum(p.values()))


# --- communication -----------------------------------------------------------------------------


def micro_batches(s: dict) -> int:
    return s["global_batch"] // (s["dp"] * s["micro_batch"])


def group_bandwidth(s: dict, axis: str, order: tuple[str, ...] = ORDER) -> float:
    """Bytes/s one way per GPU that a ring over ``axis``'s group reaches, before efficiency, with
    ranks laid out in ``order`` (innermost first): NVLink when the group fits in a node; across nodes,
    NCCL runs one ring per NIC (03, 04), so a group with k members in each node drives k NICs, never
    faster than NVLink."""
    stride = math.prod(s[a] for a in order[: order.index(axis)])
    span = stride * s[axis]
    if span <= s["gpus_per_node"]:
        return s["nvlink"]
    members_per_node = max(1, s["gpus_per_node"] // stride)
    return min(s["nvlink"], members_per_node * s["network"])


def activation_bytes(s: dict) -> float:
    """One micro-batch's hidden states on one CP rank, bf16: 2 (s / cp) b h bytes."""
    return 2 * tokens(s) * s["hidden"]


def tp_bytes_per_layer(s: dict) -> float:
    """Bytes one GPU sends for one layer and one micro-batch: two all_reduces forward and two
    backward (with sequence parallelism, an all_gather and a reduce_scatter in place of each: the
    same bytes), two more forward under full recomputation; a ring sends 2(t-1)/t of each."""
    t = s["tp"]
    all_reduces = 4 + (2 if s["recompute"] == "full" else 0)
    return all_reduces * 2 * (t - 1) / t * activation_bytes(s)


def cp_bytes_per_layer(s: dict) -> float:
    """Llama 3's context parallelism: K and V of the whole sequence all_gathered forward (again under
    full recomputation), their gradients reduce_scattered backward; each rank brings its (cp-1)/cp."""
    cp = s["cp"]
    kv_per_rank = max(s["kv_heads"] // s["tp"], 1) * s["hidden"] // s["heads"]
    gathered = 2 * 2 * s["seq"] * s["micro_batch"] * kv_per_rank  # K and V, bf16
    return (2 + (1 if s["recompute"] == "full" else 0)) * (cp - 1) / cp * gathered


def pp_message_bytes(s: dict) -> float:
    """What crosses a stage boundary for one micro-batch, one way: with TP, Megatron's scatter/gather
    (and sequence parallelism) send each GPU's t-th of the hidden states (Narayanan et al., 4.1)."""
    return activation_bytes(s) / s["tp"]


def dp_bytes(s: dict) -> dict[str, float]:
    """Bytes one GPU sends per step over its DP group: ``"reduce"``, the gradients' reduction once a
    step (an all_reduce, or with ZeRO a reduce_scatter); ``"gather"``, ZeRO's all_gather of the
    bf16 parameters once a step; ``"micro_batch"``, what is paid on every micro-batch (all m)."""
    d, m, zero = s["dp"], micro_batches(s), s["zero"]
    psi = busiest_params(s)
    ring = (d - 1) / d
    gradient = 4 if s["grad_accumulation"] == "fp32" else 2
    gather = ring * 2 * psi if zero >= 1 else 0.0
    if s["grad_accumulation"] == "fp32" or zero <= 1:  # summed over the micro-batches, reduced once
        reduce = (2 if zero == 0 else 1) * ring * gradient * psi
        return {"reduce": reduce, "gather": gather, "micro_batch": 0.0}
    if zero == 2:  # a reduce_scatter every micro-batch
        return {"reduce": 0.0, "gather": gather, "micro_batch": m * ring * 2 * psi}
    return {
        "reduce": 0.0,
        "gather": 0.0,
        "micro_batch": m * 3 * ring * 2 * psi,
    }  # two all_gathers, a reduce_scatter


def bytes_per_step(spec: dict) -> dict[str, float]:
    """Bytes one GPU of the busiest stage sends in a step, by axis."""
    s = read_spec(spec)
    m, layers = micro_batches(s), max(stage_layers(s))
    return {
        "tp": m * layers * tp_bytes_per_layer(s) if s["tp"] > 1 else 0.0,
        "cp": m * layers * cp_bytes_per_layer(s) if s["cp"] > 1 else 0.0,
        "pp": pp_bytes(s),
        "dp": sum(dp_bytes(s).values()) if s["dp"] > 1 else 0.0,
    }


def pp_bytes(s: dict) -> float:
    """Each micro-batch crosses each of a GPU's v chunk boundaries, forward and back."""
    return 2 * s["virtual_stages"] * micro_batches(s) * pp_message_bytes(s) if s["pp"] > 1 else 0.0


# --- time --------------------------------------------------------------------------------------


def attention_flops(s: dict) -> float:
    """FLOPs of one layer's QK^T and PV forward, for one micro-batch on one GPU: 4 s h a token, half
    of it under a causal mask when FlashAttention skips the masked blocks (without it, the whole
    square is computed)."""
    return tokens(s) * 4 * s["seq"] * s["hidden"] * (0.5 if s["flash_attention"] else 1.0) / s["tp"]


def layer_flops(s: dict) -> float:
    """FLOPs of one layer's forward for one micro-batch on one GPU: 2 per parameter per token, and
    attention's."""
    return tokens(s) * 2 * layer_params(s) / s["tp"] + attention_flops(s)


def micro_batch_parts(s: dict) -> dict[str, float]:
    """Seconds one micro-batch's forward and backward take on the slowest stage (all its chunks)."""
    peak = s["efficiency"] * s["peak_flops"]
    passes = 3 + (1 if s["recompute"] == "full" else 0)  # backward is twice the forward
    layer = passes * layer_flops(s) + (attention_flops(s) if s["recompute"] == "selective" else 0.0)
    logits = 3 * tokens(s) * 2 * s["vocab"] * s["hidden"] / s["tp"]
    traffic = s["memory_passes"] * passes / 3 * layer_activation_bytes(s, "none") / s["hbm_bandwidth"]
    counts = stage_layers(s)
    # the last stage also runs the output layer; the slowest stage sets the pace
    stage = max(range(s["pp"]), key=lambda i: counts[i] * layer + (logits if i == s["pp"] - 1 else 0))
    n = counts[stage]
    return {
        "compute": (n * layer + (logits if stage == s["pp"] - 1 else 0.0)) / peak,
        "memory_bound": n * traffic,
        "tp": n * tp_bytes_per_layer(s) / (s["link_efficiency"] * group_bandwidth(s, "tp"))
        if s["tp"] > 1
        else 0.0,
        "cp": n * cp_bytes_per_layer(s) / (s["link_efficiency"] * group_bandwidth(s, "cp"))
        if s["cp"] > 1
        else 0.0,
    }


def time_parts(spec: dict) -> dict[str, float]:
    """The step's seconds by cause: the m micro-batches' compute, memory-bound work, TP and CP (on
    the critical path), the bubble ((pp-1)/v micro-batch times), pipeline messages, what DP leaves
    exposed, and the optimizer's step (memory-bound)."""
    s = read_spec(spec)
    m, p, v = micro_batches(s), s["pp"], s["virtual_stages"]
    mb = micro_batch_parts(s)
    one = sum(mb.values())
    parts = {key: m * value for key, value in mb.items()}
    parts["bubble"] = (p - 1) / v * one
    parts["pp"] = pp_bytes(s) / (s["link_efficiency"] * group_bandwidth(s, "pp"))
    parts["dp"] = 0.0
    if s["dp"] > 1:
        parts["dp"] = dp_exposed(s, mb, s["link_efficiency"] * group_bandwidth(s, "dp"))
    psi = busiest_params(s) / (s["dp"] if s["zero"] >= 1 else 1)
    parts["optimizer"] = 32 * psi / s["hbm_bandwidth"]  # reads and writes of AdamW's 16 bytes a parameter
    return parts


def dp_exposed(s: dict, mb: dict[str, float], bandwidth: float) -> float:
    """What DP adds to the step, its bytes at ``bandwidth`` against the first stage's micro-batch."""
    sent = dp_bytes(s)
    forward = sum(mb.values()) / 3
    return exposed_seconds(
        sent["reduce"] / bandwidth,
        sent["gather"] / bandwidth,
        sent["micro_batch"] / bandwidth,
        forward,
        2 * forward,
        micro_batches(s),
    )


def exposed_seconds(
    reduce: float, gather: float, per_micro_batch: float, forward: float, backward: float, micro_batches: int
) -> float:
    """Seconds DP's communication adds to a step. ``reduce``, the gradients' reduction once a step,
    starts as the first stage's last backward makes gradients and hides under it (04's buckets);
    ``gather``, ZeRO's all_gather of the updated parameters, is what the next first forward needs and
    is prefetched under it (07); ``per_micro_batch``, the m micro-batches' collectives together (FSDP),
    each micro-batch's share prefetched under that micro-batch's forward and backward. ``forward`` and
    ``backward``: one micro-batch's, on the first stage. What is shorter than its cover adds nothing."""
    return (
        max(0.0, reduce - backward)
        + max(0.0, gather - forward)
        + micro_batches * max(0.0, per_micro_batch / micro_batches - (forward + backward))
    )


def model_flops(s: dict) -> float:
    """The model's FLOPs in a step, as MFU counts them: 6 per parameter per token for the blocks and
    the output layer (the input embedding is a lookup), and attention's QK^T and PV forward and
    backward under a causal mask, 6 s h per layer per token (half of PaLM's 12 s h, arXiv 2204.02311,
    appendix B, which counts the whole square). Recomputation is not counted."""
    per_token = 6 * (s["layers"] * layer_params(s) + s["vocab"] * s["hidden"])
    per_token += 6 * s["layers"] * s["seq"] * s["hidden"]
    return per_token * s["global_batch"] * s["seq"]


def predict(spec: dict) -> dict:
    """The planner: ``step_seconds``, ``memory_bytes`` (the fullest GPU), ``fits`` (memory at most
    ``hbm``), ``mfu``, and the parts of each (``time``, ``memory``, ``bytes``)."""
    s = read_spec(spec)
    time, memory = time_parts(s), memory_parts(s)
    seconds, nbytes = sum(time.values()), sum(memory.values())
    return {
        "step_seconds": seconds,
        "memory_bytes": nbytes,
        "fits": nbytes <= s["hbm"],
        "mfu": model_flops(s) / (gpus(s) * s["peak_flops"] * seconds),
        "micro_batches": micro_batches(s),
        "params": params(s),
        "time": time,
        "memory": memory,
        "bytes": bytes_per_step(s),
    }
