"""Notebook 08's checks of the planner: memory per GPU and step time exact against the model the
notebook states, for configurations chosen so that each typical mistake changes the answer; the
best configuration among candidates; the MFU of a configuration."""

from __future__ import annotations

from collections.abc import Callable

from ..checks import fail, plain_number
from .layouts import A100_NODES, GPT_13B, H100_NODES, LLAMA_70B, Cluster, Config, Model
from .planner import (
    best,
    memory_per_gpu,
    model_flops_utilization,
    step_seconds,
)

_MEMORY_MISTAKES = {
    "params_not_over_pp": "each GPU holds the parameters of its pipeline stage only: 1/(tp pp) of them",
    "gpipe_in_flight": "under 1F1B the first stage holds at most pp micro-batches' activations, "
    "not all of them",
    "pp_in_flight": "with fewer micro-batches than stages, the first stage holds all m of them, not pp: "
    "min(pp, m)",
    "recompute_no_sp": "with sequence parallelism, the one input a recomputed layer keeps is split "
    "across the TP ranks too",
    "tp_splits_everything": "without sequence parallelism, part of each layer's activations "
    "(LayerNorm and dropout) is replicated on every TP rank",
}
_TIME_MISTAKES = {
    "always_nvlink": "a group wider than a node crosses the network, at the network's bandwidth",
    "bubble_fraction": "the bubble adds (pp-1) micro-batch times to the m of the compute: (pp-1)/m of it",
    "recompute_free": "recomputation runs each forward again: 8 FLOPs a parameter a token, not 6",
    "zero3_like_ddp": "ZeRO-3 gathers the parameters twice and reduce-scatters the gradients: "
    "3 times the bytes, not 2",
}


def _cases(hidden: bool) -> list[tuple[Model, Cluster, Config]]:
    shown = [
        (GPT_13B, H100_NODES, Config(dp=8, tp=2, pp=1, zero=1, micro_batch=2, micro_batches=4)),
        (
            LLAMA_70B,
            H100_NODES,
            Config(dp=4, tp=8, pp=2, zero=0, micro_batch=1, micro_batches=8, sequence_parallel=True),
        ),
    ]
    if not hidden:
        return shown
    return [
        (LLAMA_70B, H100_NODES, Config(dp=2, tp=4, pp=4, zero=2, micro_batch=1, micro_batches=16)),
        (
            LLAMA_70B,
            H100_NODES,
            Config(
                dp=2,
                tp=16,
                pp=2,
                zero=3,
                micro_batch=2,
                micro_batches=3,
                recompute=True,
                sequence_parallel=True,
            ),
        ),
        (
            GPT_13B,
            A100_NODES,
            Config(dp=3, tp=2, pp=5, zero=1, micro_batch=3, micro_batches=7, recompute=True),
        ),
        (GPT_13B, H100_NODES, Config(dp=2, tp=2, pp=2, zero=3, micro_batch=1, micro_batches=2)),
        (GPT_13B, A100_NODES, Config(dp=24, tp=1, pp=1, zero=2, micro_batch=4, micro_batches=1)),
        (
            LLAMA_70B,
            A100_NODES,
            Config(dp=1, tp=8, pp=10, zero=0, micro_batch=1, micro_batches=40, sequence_parallel=True),
        ),
        # fewer micro-batches than stages: the first stage holds all of them, not pp
        (LLAMA_70B, H100_NODES, Config(dp=2, tp=8, pp=8, zero=1, micro_batch=1, micro_batches=4)),
        # 24 / t with t not dividing 24, no sequence parallelism, no recomputation
        (GPT_13B, H100_NODES, Config(dp=1, tp=16, pp=2, zero=0, micro_batch=1, micro_batches=4)),
    ]


def _number(value: object, what: str) -> float:
    __tracebackhide__ = True
    number = plain_number(value)
    if number is None or isinstance(number, bool):
        fail(f"{what} should return a number, got {value!r:.120}")
    return float(number)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * abs(b) + 1e-12


def _describe(model: Model, cluster: Cluster, config: Config) -> str:
    return f"{model.name} on {cluster.name}, {config}"


def _check_each(
    fn: Callable, hidden: bool, reference: Callable, mistakes: dict[str, str], what: str, unit: str
) -> None:
    __tracebackhide__ = True
    for model, cluster, config in _cases(hidden):
        got = _number(fn(model, cluster, config), what)
        expected = reference(model, cluster, config)
        if _close(got, expected):
            continue
        message = f"{what}({_describe(model, cluster, config)}) = {got:.6g} {unit}"
        message += "" if hidden else f", expected {expected:.6g} {unit}"
        for mistake, why in mistakes.items():
            if not _close(expected, reference(model, cluster, config, mistake)) and _close(
                got, reference(model, cluster, config, mistake)
            ):
                fail(f"{message}: {why}.")
        fail(message + ".")


def check_memory(fn: Callable, hidden: bool = False) -> None:
    """``fn(model, cluster, config)``: the bytes one GPU holds, as the notebook's model counts them."""
    __tracebackhide__ = True
    _check_each(fn, hidden, memory_per_gpu, _MEMORY_MISTAKES, getattr(fn, "__name__", "memory"), "bytes")


def check_time(fn: Callable, hidden: bool = False) -> None:
    """``fn(model, cluster, config)``: the seconds of one step, as the notebook's model counts them."""
    __tracebackhide__ = True
    _check_each(fn, hidden, step_seconds, _TIME_MISTAKES, getattr(fn, "__name__", "time"), "s")


def check_mfu(fn: Callable) -> None:
    """``fn(model, cluster, config, seconds)``: the model FLOPs utilisation of a step of ``seconds``."""
    __tracebackhide__ = True
    for model, cluster, config in _cases(False) + _cases(True):
        seconds = 1.7 * step_seconds(model, cluster, config)  # not the reference's time: the one given
        got = _number(fn(model, cluster, config, seconds), "mfu")
        expected = model_flops_utilization(model, cluster, config) / 1.7
        if _close(got, expected):
            continue
        if _close(got, 100 * expected):
            fail("mfu should return a fraction (0.4), not a percentage (40).")
        replica = ""
        if config.dp > 1 and _close(got, expected / config.dp):
            replica = (
                f" That is what you get if you count the tokens of one data-parallel replica, not of all "
                f"{config.dp}."
            )
        fail(
            f"mfu({_describe(model, cluster, config)}, seconds={seconds:.4g}) = {got:.4g}: count the model's "
            "FLOPs (6 a parameter a token, for every token of the global batch) against what every GPU "
            f"could do at peak in those seconds.{replica}"
        )


def _candidates(model: Model, cluster: Cluster, gpus: int, batch: int) -> list[Config]:
    """Layouts of ``gpus`` GPUs for a global batch of ``batch`` sequences, micro-batch 1."""
    found = []
    for tp in (1, 2, 4, 8, 16):
        for pp in (1, 2, 4, 8):
            if gpus % (tp * pp) or model.layers % pp:
                continue
            dp = gpus // (tp * pp)
            if batch % dp:
                continue
            for zero in (0, 1, 3):
                for recompute in (False, True):
                    found.append(Config(dp, tp, pp, zero, 1, batch // dp, recompute, tp > 1))
    return found


def check_best(fn: Callable, hidden: bool = False) -> None:
    """``fn(model, cluster, candidates, memory, time)``: the fastest candidate that fits, by the
    reference's memory and time, or None when none does."""
    __tracebackhide__ = True
    cases = [(LLAMA_70B, H100_NODES, 64, 256)]
    if hidden:
        cases += [
            (GPT_13B, A100_NODES, 16, 64),
            (LLAMA_70B, A100_NODES, 128, 512),
            (LLAMA_70B, H100_NODES, 8, 8),
        ]
    for model, cluster, gpus, batch in cases:
        candidates = _candidates(model, cluster, gpus, batch)
        expected = best(model, cluster, candidates)
        got = fn(model, cluster, list(candidates), memory_per_gpu, step_seconds)
        if got == expected and (got is None or type(got) is Config):
            continue
        where = f"{model.name} on {gpus} GPUs of {cluster.name}, among {len(candidates)} candidates"
        if got is not None and type(got) is Config and memory_per_gpu(model, cluster, got) > cluster.hbm:
            fail(f"{where}: you chose {got}, which does not fit in {cluster.hbm / 1e9:.0f} GB.")
        if expected is None:
            fail(f"{where}: none of them fits; return None, got {got!r:.120}.")
        if got is not None and type(got) is Config and got in candidates:
            least = ""
            fitting = [c for c in candidates if memory_per_gpu(model, cluster, c) <= cluster.hbm]
            if memory_per_gpu(model, cluster, got) == min(memory_per_gpu(model, cluster, c) for c in fitting):
                least = " It needs the least memory of those that fit: among them, pick the fastest."
            if step_seconds(model, cluster, got) == step_seconds(model, cluster, expected):
                fail(
                    f"{where}: you chose {got}, as fast as the fastest that fits, but it needs "
                    f"{memory_per_gpu(model, cluster, got) / 1e9:.1f} GB where {expected} needs "
                    f"{memory_per_gpu(model, cluster, expected) / 1e9:.1f} GB: among equally fast layouts, "
                    "pick the one that needs the least memory."
                )
            fail(f"{where}: you chose {got}, which fits but is not the fastest that does.{least}")
        fail(f"{where}: return one of the candidates (a Config), got {got!r:.120}.")
