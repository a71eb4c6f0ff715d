"""The models and clusters notebook 08's planner describes, as the dicts its ``spec`` is made of;
``spec(model, cluster, **layout)`` joins them into one, and ``layout_grid`` makes every layout of a
number of GPUs (the explorer's, and the best-layout check's candidates). Sources are in
``published`` and in the notebook."""

from __future__ import annotations

from .published import A100_CLUSTER, H100_CLUSTER, LLAMA3_405B, gpt

LLAMA_70B = {  # Llama 2 70B's shapes (arXiv 2307.09288), at 4K tokens
    "layers": 80,
    "hidden": 8192,
    "heads": 64,
    "kv_heads": 8,
    "ffn_hidden": 28672,
    "seq": 4096,
    "vocab": 32000,
}
GPT_13B = gpt(40, 5120, 40)
MEGATRON_1T = gpt(128, 25600, 160)
MODELS = {
    "a 13B GPT": GPT_13B,
    "a 70B Llama": LLAMA_70B,
    "Llama 3 405B": LLAMA3_405B,
    "Megatron-LM 1T": MEGATRON_1T,
}
CLUSTERS = {"H100 nodes": H100_CLUSTER, "A100 nodes": A100_CLUSTER}
LAYOUT_DEFAULTS = {
    "cp": 1,
    "zero": 0,
    "micro_batch": 1,
    "recompute": "none",
    "sequence_parallel": False,
    "virtual_stages": 1,
}


def spec(model: dict, cluster: dict, **layout: object) -> dict:
    """One dict of a model, a cluster and a layout: ``dp``, ``tp``, ``pp`` and ``global_batch``
    must be given; cp 1, ZeRO 0, micro-batches of 1, no recomputation, no sequence parallelism and
    no interleaving unless said."""
    return {**model, **cluster, **LAYOUT_DEFAULTS, **layout}


def layout_grid(
    model: dict,
    cluster: dict,
    gpus: int,
    global_batch: int,
    pipeline_sizes: tuple[int, ...],
    **layout: object,
) -> list[dict]:
    """Every layout of ``gpus`` GPUs as tp x pp x dp: tp a power of two up to 16 that divides the
    heads, pp one of ``pipeline_sizes`` no larger than the layers, dp the rest, dividing the global
    batch; sequence parallelism wherever there is TP, and ``layout``'s other keys."""
    found = []
    for tp in (1, 2, 4, 8, 16):
        for pp in pipeline_sizes:
            if gpus % (tp * pp) or pp > model["layers"] or model["heads"] % tp:
                continue
            dp = gpus // (tp * pp)
            if global_batch % dp == 0:
                found.append(
                    spec(
                        model,
                        cluster,
                        dp=dp,
                        tp=tp,
                        pp=pp,
                        global_batch=global_batch,
                        sequence_parallel=tp > 1,
                        **layout,
                    )  # fmt: skip
                )
    return found
