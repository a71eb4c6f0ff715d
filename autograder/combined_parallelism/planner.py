"""The reference for notebook 08's planner: the memory and time of one training step of a
transformer on a cluster, for a layout of data, tensor and pipeline parallelism, exactly as the
notebook states the model. ``mistake`` names a typical slip, so that a check can say which it is."""

from __future__ import annotations

from .layouts import Cluster, Config, Model


def state_bytes(psi: float, dp: int, zero: int, mistake: str = "") -> float:
    """Mixed-precision Adam's 16 bytes a parameter (2 + 2 + 12), the ZeRO stage's share sharded."""
    if zero == 0:
        return 16 * psi
    if zero == 1:
        return 4 * psi + 12 * psi / dp
    if zero == 2:
        return 2 * psi + 14 * psi / dp
    return 16 * psi / dp


def layer_activation_bytes(m: Model, c: Config, mistake: str = "") -> float:
    """One layer's saved activations for one micro-batch, in bytes (Korthikanti et al.'s 16-bit
    count, 34 s b h a layer, with FlashAttention: the s x s attention scores are never stored)."""
    sbh, t = m.seq * c.micro_batch * m.hidden, c.tp
    if c.recompute:  # only the layer's input is kept; sequence parallelism splits it too
        return 2 * sbh / (t if c.sequence_parallel and mistake != "recompute_no_sp" else 1)
    if c.sequence_parallel or mistake == "tp_splits_everything":
        return 34 * sbh / t
    return sbh * (10 + 24 / t)  # without SP, the LayerNorms' and dropouts' 10 s b h are replicated


def memory_per_gpu(m: Model, cl: Cluster, c: Config, mistake: str = "") -> float:
    psi = m.params / (c.tp * (1 if mistake == "params_not_over_pp" else c.pp))
    in_flight = min(c.pp, c.micro_batches)
    if mistake == "gpipe_in_flight":
        in_flight = c.micro_batches
    elif mistake == "pp_in_flight":
        in_flight = c.pp
    layers = m.layers / c.pp
    return state_bytes(psi, c.dp, c.zero) + layer_activation_bytes(m, c, mistake) * layers * in_flight


def _link(cl: Cluster, span: int, mistake: str = "") -> float:
    return cl.nvlink if span <= cl.gpus_per_node or mistake == "always_nvlink" else cl.network


def time_parts(m: Model, cl: Cluster, c: Config, mistake: str = "") -> dict[str, float]:
    """The step's seconds: compute, bubble, TP, PP and DP communication (nothing overlapped)."""
    s, b, h = m.seq, c.micro_batch, m.hidden
    tokens = c.micro_batches * b * s
    per_token = 6 if (mistake == "recompute_free" or not c.recompute) else 8
    compute = per_token * m.params * tokens / (c.tp * c.pp) / cl.peak_flops
    bubble = (c.pp - 1) / c.micro_batches * compute
    if mistake == "bubble_fraction":
        bubble = (c.pp - 1) / (c.micro_batches + c.pp - 1) * compute
    tp = pp = dp = 0.0
    if c.tp > 1:
        per_layer = 4 + (2 if c.recompute else 0)
        bytes_each = 2 * (c.tp - 1) / c.tp * 2 * s * b * h
        tp = m.layers / c.pp * c.micro_batches * per_layer * bytes_each / _link(cl, c.tp, mistake)
    if c.pp > 1:
        pp = 2 * c.micro_batches * 2 * s * b * h / _link(cl, c.tp * c.pp, mistake)
    if c.dp > 1:
        grads = 2 * m.params / (c.tp * c.pp)
        factor = 3 if c.zero == 3 and mistake != "zero3_like_ddp" else 2
        dp = factor * (c.dp - 1) / c.dp * grads / _link(cl, c.gpus, mistake)
    return {"compute": compute, "bubble": bubble, "tp": tp, "pp": pp, "dp": dp}


def step_seconds(m: Model, cl: Cluster, c: Config, mistake: str = "") -> float:
    return sum(time_parts(m, cl, c, mistake).values())


def model_flops_utilization(m: Model, cl: Cluster, c: Config) -> float:
    tokens = c.dp * c.micro_batches * c.micro_batch * m.seq
    return 6 * m.params * tokens / (c.gpus * cl.peak_flops * step_seconds(m, cl, c))


def best(m: Model, cl: Cluster, candidates: list[Config]) -> Config | None:
    fitting = [c for c in candidates if memory_per_gpu(m, cl, c) <= cl.hbm]
    # The fastest; among equally fast ones, the one that leaves the most memory free.
    return min(fitting, key=lambda c: (step_seconds(m, cl, c), memory_per_gpu(m, cl, c)), default=None)
