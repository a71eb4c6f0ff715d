"""Notebook 08's checks of the planner's pieces, each against the reference (``planner``) on cases
chosen so that each typical mistake changes the answer, and named when it is made: the states a GPU
keeps (``check_states``), the bandwidth a group's ring reaches (``check_group_bandwidth``), what
DP's communication leaves exposed (``check_exposed``), the efficiency fitted on published runs
(``check_fit_efficiency``), the MFU of a step (``check_mfu``) and the fastest layout that fits
(``check_best``)."""

from __future__ import annotations

import math
from collections.abc import Callable

from ..checks import fail, plain_number
from . import planner
from .layouts import CLUSTERS, GPT_13B, LLAMA_70B, MEGATRON_1T, layout_grid, spec
from .published import A100_CLUSTER, H100_CLUSTER, LLAMA3_405B


def _number(value: object, what: str) -> float:
    __tracebackhide__ = True
    number = plain_number(value)
    if number is None or isinstance(number, bool) or not math.isfinite(number):
        fail(f"{what} should return a finite number, got {value!r:.120}")
    return float(number)


def _close(a: float, b: float, rel: float = 1e-6) -> bool:
    return abs(a - b) <= rel * abs(b) + 1e-12


def _named(got: float, expected: float, mistakes: dict[str, float], message: str) -> None:
    """Fail with ``message``, naming the first mistake that gives ``got`` where the right answer
    does not."""
    __tracebackhide__ = True
    for why, value in mistakes.items():
        if not _close(value, expected) and _close(got, value):
            fail(f"{message}: {why}.")
    fail(message + ".")


def _off(got: float, expected: float) -> str:
    """Which way an answer is off, and no more: the expected value would give the rule away."""
    return "too much" if got > expected else "too little"


# --- exercise 5: states --------------------------------------------------------------------------


def _states_mistakes(psi: float, dp: int, zero: int, accumulation: str) -> dict[str, float]:
    def over(stage: int) -> int:  # what a state is divided by: dp from this ZeRO stage on
        return dp if zero >= stage else 1

    table = 2 * psi / over(3) + 2 * psi / over(2) + 12 * psi / over(1)  # 07's table, bf16 gradients
    if accumulation == "bf16":
        return {
            "mixed-precision AdamW keeps an fp32 master copy of the parameters besides its two moments: "
            "12 bytes a parameter, not 8": table - 4 * psi / over(1),
            "ZeRO-1 shards the optimizer's state only; the bf16 parameters and gradients stay whole": (
                2 * psi / dp + 2 * psi / dp + 12 * psi / dp if zero == 1 else math.nan
            ),
            "bf16 gradients take 2 bytes a parameter; fp32 accumulators are the other way": (
                2 * psi / over(3) + 4 * psi + 12 * psi / over(1)
            ),
        }
    return {
        "with fp32 accumulation the gradients are fp32 accumulators, 4 bytes a parameter, that every "
        "rank keeps whole until the step's one reduction; 07's table is for bf16 gradients": table,
        "fp32 accumulators are kept whole until the step's one reduction: no ZeRO stage shards them": (
            2 * psi / over(3) + 4 * psi / over(2) + 12 * psi / over(1)
        ),
        "with fp32 accumulation ZeRO-3 keeps the gathered parameters whole through the step, as Llama 3 "
        "does (it does not reshard them)": 2 * psi / dp + 4 * psi + 12 * psi / dp if zero == 3 else math.nan,
        "mixed-precision AdamW keeps an fp32 master copy of the parameters besides its two moments: "
        "12 bytes a parameter, not 8": 6 * psi + 8 * psi / over(1),
    }


_STATE_CASES = [
    (7e9, 8, 0, "bf16"),
    (7e9, 8, 2, "fp32"),
    (3.17e9, 64, 3, "fp32"),
    (1.3e9, 6, 1, "bf16"),
    (2.5e9, 3, 2, "bf16"),
    (2.5e9, 3, 3, "bf16"),
    (5e8, 5, 1, "fp32"),
    (4e9, 16, 0, "fp32"),
    (1e9, 1, 3, "fp32"),
]


def check_states(fn: Callable, hidden: bool = False) -> None:
    """``fn(psi, dp, zero, grad_accumulation)``: the bytes of parameters, gradients and AdamW's state
    a GPU keeps for its ``psi`` parameters."""
    __tracebackhide__ = True
    for psi, dp, zero, accumulation in _STATE_CASES[slice(None) if hidden else slice(2)]:
        call = f"states_bytes({psi:g}, dp={dp}, zero={zero}, {accumulation!r})"
        got = _number(fn(psi, dp, zero, accumulation), call)
        expected = planner.state_bytes(psi, dp, zero, accumulation)
        if _close(got, expected):
            continue
        message = f"{call} = {got:.6g} bytes, {_off(got, expected)}"
        if _close(got, expected / psi) or _close(got, expected / psi / dp):
            fail(f"{message}: return bytes for all {psi:g} parameters, not bytes a parameter.")
        _named(got, expected, _states_mistakes(psi, dp, zero, accumulation), message)


# --- exercise 6: which link a group's ring crosses -----------------------------------------------


def _bandwidth_cases(hidden: bool) -> list[tuple[dict, str]]:
    shown = [
        (spec(LLAMA_70B, H100_CLUSTER, dp=4, tp=8, pp=2, global_batch=64), "tp"),
        (spec(LLAMA_70B, H100_CLUSTER, dp=4, tp=8, pp=2, global_batch=64), "dp"),
        (spec(GPT_13B, H100_CLUSTER, dp=8, tp=2, pp=1, global_batch=64), "dp"),
    ]
    if not hidden:
        return shown
    return shown + [
        (spec(LLAMA_70B, H100_CLUSTER, dp=2, tp=16, pp=1, global_batch=64), "tp"),
        (spec(GPT_13B, A100_CLUSTER, dp=3, tp=2, pp=2, global_batch=6), "pp"),
        (spec(GPT_13B, A100_CLUSTER, dp=3, tp=2, pp=2, global_batch=6), "dp"),
        (spec(GPT_13B, A100_CLUSTER, dp=2, tp=2, pp=2, global_batch=6), "dp"),
        (spec(GPT_13B, H100_CLUSTER, dp=16, tp=1, pp=1, global_batch=64), "dp"),
        (spec(MEGATRON_1T, A100_CLUSTER, dp=6, tp=8, pp=64, global_batch=3072), "pp"),
        (spec(LLAMA3_405B, H100_CLUSTER, dp=8, tp=8, pp=16, cp=16, global_batch=128), "cp"),
        (spec(GPT_13B, {**H100_CLUSTER, "gpus_per_node": 4}, dp=2, tp=4, pp=3, global_batch=6), "pp"),
        (spec(GPT_13B, H100_CLUSTER, dp=2, tp=1, pp=1, global_batch=6), "dp"),
        # NICs of 400 Gb/s on A100 nodes: eight of them carry more than the A100's NVLink
        (spec(GPT_13B, {**A100_CLUSTER, "network": 50e9}, dp=2, tp=16, pp=1, global_batch=64), "tp"),
    ]


def _bandwidth_mistakes(s: dict, axis: str) -> dict[str, float]:
    stride = math.prod(s[a] for a in planner.ORDER[: planner.ORDER.index(axis)])
    megatron = ("tp", "cp", "dp", "pp")  # DP inside PP: Megatron-LM's order, not this notebook's
    return {
        "the ranks are laid out as in section 1, TP innermost, then CP, then PP, then DP": (
            planner.group_bandwidth(s, axis, megatron)
        ),
        "a ring that leaves the node runs one ring per NIC: a group with k members in each node drives k "
        "of them (03's eight rings), not one": s["network"],
        "a group wider than a node crosses the network": s["nvlink"],
        "k NICs can carry no more than the group's NVLink legs carry: cap at NVLink": (
            max(1, s["gpus_per_node"] // stride) * s["network"]
        ),
    }


def check_group_bandwidth(fn: Callable, hidden: bool = False) -> None:
    """``fn(spec, axis)``: the bytes/s one way per GPU a ring over the axis's group reaches."""
    __tracebackhide__ = True
    for s, axis in _bandwidth_cases(hidden):
        layout = ", ".join(f"{a} {s[a]}" for a in planner.ORDER)
        call = f"group_bandwidth({axis!r}; {layout}, {s['gpus_per_node']} GPUs a node)"
        got = _number(fn(dict(s), axis), call)
        expected = planner.group_bandwidth(s, axis)
        if _close(got, expected):
            continue
        message = f"{call} = {got / 1e9:.4g} GB/s, {_off(got, expected)}"
        _named(got, expected, _bandwidth_mistakes(s, axis), message)


# --- exercise 7: what DP leaves exposed ----------------------------------------------------------

# (reduce, gather, per_micro_batch, forward, backward, micro_batches), in seconds
_EXPOSED_CASES = [
    (0.9, 0.0, 0.0, 0.2, 0.4, 8),  # DDP's reduction, longer than the last backward
    (0.3, 0.25, 0.0, 0.1, 0.15, 16),  # ZeRO-1: a reduce_scatter and a gather, each longer than its cover
    (0.0, 0.0, 12.0, 0.3, 0.6, 8),  # FSDP every micro-batch: 1.5 s a micro-batch against 0.9
    (0.5, 0.15, 0.0, 0.2, 0.4, 4),  # the reduction outlasts the backward, the gather hides
    (0.05, 0.01, 2.0, 0.1, 0.2, 16),  # everything hides
    (0.0, 0.4, 3.0, 0.25, 0.5, 3),  # ZeRO-2: a reduce_scatter every micro-batch, a gather once
    (1.2, 0.0, 0.0, 0.5, 1.0, 1),  # one micro-batch
]


def _exposed_mistakes(reduce, gather, per_mb, forward, backward, m) -> dict[str, float]:  # noqa: ANN001
    whole = forward + backward
    return {
        "the reduction starts only as the last backward makes gradients: it can hide under that backward, "
        "not under the forward before it": max(0.0, reduce - whole)
        + max(0.0, gather - forward)
        + m * max(0.0, per_mb / m - whole),
        "the next step's first forward needs the gathered parameters: the gather hides under that forward, "
        "not under a backward": max(0.0, reduce - backward)
        + max(0.0, gather - backward)
        + m * max(0.0, per_mb / m - whole),
        "each micro-batch's collectives are prefetched under that micro-batch's work, not all of them under "
        "one micro-batch's": max(0.0, reduce - backward)
        + max(0.0, gather - forward)
        + max(0.0, per_mb - whole),
        "communication shorter than the work it hides under adds nothing; it takes nothing away either": (
            reduce - backward + gather - forward + per_mb - m * whole
        ),
        "count only what sticks out: communication that hides under compute adds no time": reduce
        + gather
        + per_mb,
    }


def check_exposed(fn: Callable, hidden: bool = False) -> None:
    """``fn(reduce, gather, per_micro_batch, forward, backward, micro_batches)``: the seconds DP adds."""
    __tracebackhide__ = True
    for case in _EXPOSED_CASES[slice(None) if hidden else slice(2)]:
        call = "exposed_dp({}, {}, {}, forward={}, backward={}, m={})".format(*case)
        got = _number(fn(*case), call)
        expected = planner.exposed_seconds(*case)
        if _close(got, expected):
            continue
        message = f"{call} = {got:.6g} s, {_off(got, expected)}"
        _named(got, expected, _exposed_mistakes(*case), message)


# --- exercise 8: fitting the efficiency ----------------------------------------------------------


def reference_fit(runs: list[dict]) -> float:
    """The efficiency e that makes sum((at_peak / e + rest - seconds)^2) least: in x = 1/e the model
    is linear, and x = sum(a (t - r)) / sum(a^2)."""
    x = sum(r["at_peak"] * (r["seconds"] - r["rest"]) for r in runs) / sum(r["at_peak"] ** 2 for r in runs)
    return 1 / x


def _fit_mistakes(runs: list[dict]) -> dict[str, float]:
    ratios = [r["at_peak"] / (r["seconds"] - r["rest"]) for r in runs]
    logs = sum(math.log(r["at_peak"] / (r["seconds"] - r["rest"])) for r in runs) / len(runs)
    return {
        "you returned 1/e: the fit's unknown is x = 1/e, and the efficiency is its inverse": 1
        / reference_fit(runs),
        "fit the seconds, as the statement asks, not the efficiency of each run averaged": sum(ratios)
        / len(runs),
        "fit the seconds, not their logarithms": math.exp(logs),
        "the rest of the step is not matmuls: subtract it before fitting": sum(
            r["at_peak"] ** 2 for r in runs
        )
        / sum(r["at_peak"] * r["seconds"] for r in runs),
        "return a fraction of peak, not a percentage": 100 * reference_fit(runs),
    }


def _synthetic_runs(efficiency: float, noise: list[float]) -> list[dict]:
    runs = []
    for i, wobble in enumerate(noise):
        at_peak, rest = 3.0 + 5 * i, 0.4 + 0.3 * (i % 3)
        runs.append(
            {"at_peak": at_peak, "rest": rest, "seconds": (at_peak / efficiency + rest) * (1 + wobble)}
        )
    return runs


def check_fit_efficiency(fn: Callable) -> None:
    """``fn(runs)``: the efficiency whose predicted step times are nearest the runs' in least squares;
    each run is a dict with ``seconds`` (reported), ``at_peak`` and ``rest``."""
    __tracebackhide__ = True
    cases = [
        ("runs the model fits exactly (efficiency 0.55)", _synthetic_runs(0.55, [0, 0, 0, 0])),
        ("runs with noise", _synthetic_runs(0.7, [0.05, -0.08, 0.02, 0.1, -0.03])),
        ("one run", _synthetic_runs(0.4, [0.2])),
    ]
    for what, runs in cases:
        got = _number(fn([dict(r) for r in runs]), "fit_efficiency")
        expected = reference_fit(runs)
        if not _close(got, expected, 1e-4):
            _named(got, expected, _fit_mistakes(runs), f"fit_efficiency({what}) = {got:.6g}")


# --- exercise 9: MFU -----------------------------------------------------------------------------


def _mfu_cases() -> list[dict]:
    return [
        spec(GPT_13B, H100_CLUSTER, dp=8, tp=2, pp=1, zero=1, global_batch=64, micro_batch=2),
        spec(
            LLAMA_70B,
            H100_CLUSTER,
            dp=4,
            tp=8,
            pp=2,
            global_batch=64,
            recompute="full",
            sequence_parallel=True,
        ),
        spec(LLAMA3_405B, H100_CLUSTER, dp=8, tp=8, pp=16, cp=16, zero=3, global_batch=128, seq=131072),
        spec(
            MEGATRON_1T,
            A100_CLUSTER,
            dp=6,
            tp=8,
            pp=64,
            global_batch=3072,
            recompute="full",
            virtual_stages=2,
        ),
    ]


def _mfu_mistakes(s: dict, seconds: float) -> dict[str, float]:
    full = planner.read_spec(s)
    capacity = planner.gpus(full) * s["peak_flops"] * seconds
    right = planner.model_flops(full) / capacity
    per_token = 1 / capacity * s["global_batch"] * s["seq"]  # FLOPs a token, as a share of capacity
    blocks = s["layers"] * planner.layer_params(full)
    output, attention = s["vocab"] * s["hidden"], 6 * s["layers"] * s["seq"] * s["hidden"]
    recomputed = {"full": 2 * (blocks + output) + attention / 3, "selective": attention / 3}.get(
        s["recompute"], 0
    )
    return {
        "MFU counts the model's FLOPs, not the recomputation's: that is the hardware FLOPs utilisation": right
        + recomputed * per_token,
        "the input embedding is a lookup, not a matrix product: it costs no FLOPs": right
        + 6 * output * per_token,
        "a causal mask leaves half of QK^T and PV to compute: 6 s h a layer a token, not 12": right
        + attention * per_token,
        "attention's QK^T and PV are FLOPs the model needs too": right - attention * per_token,
        "count the GPUs of every axis, context parallelism's too": right * s["cp"]
        if s["cp"] > 1
        else math.nan,
        "count the tokens of every data-parallel replica": right / s["dp"],
        "return a fraction (0.4), not a percentage (40)": 100 * right,
    }


def check_mfu(fn: Callable) -> None:
    """``fn(spec, seconds)``: the model FLOPs utilisation of a step of ``seconds``."""
    __tracebackhide__ = True
    for s in _mfu_cases():
        seconds = 1.3 * planner.predict(s)["step_seconds"]  # not the planner's time: the one given
        got = _number(fn(dict(s), seconds), "mfu")
        full = planner.read_spec(s)
        expected = planner.model_flops(full) / (planner.gpus(full) * s["peak_flops"] * seconds)
        if _close(got, expected, 1e-4):
            continue
        layout = ", ".join(f"{a} {s[a]}" for a in ("dp", "tp", "pp", "cp")) + f", recompute {s['recompute']}"
        _named(
            got,
            expected,
            _mfu_mistakes(s, seconds),
            f"mfu({s['layers']} layers, {layout}; {seconds:.4g} s) = {got:.4g}",
        )


# --- the best layout ----------------------------------------------------------------------------


def _candidates(model: dict, cluster: dict, gpus: int, batch: int) -> list[dict]:
    return [
        {**layout, "zero": zero, "recompute": recompute}
        for layout in layout_grid(model, cluster, gpus, batch, (1, 2, 4, 8))
        for zero in (0, 1, 3)
        for recompute in ("none", "full")
    ]


def _reference_best(candidates: list[dict]) -> dict | None:
    plans = [(planner.predict(c), i) for i, c in enumerate(candidates)]
    fitting = [
        (p["step_seconds"], p["memory_bytes"], i)
        for p, i in plans
        if p["memory_bytes"] <= candidates[i]["hbm"]
    ]
    return candidates[min(fitting)[2]] if fitting else None


def check_best(fn: Callable, hidden: bool = False) -> None:
    """``fn(candidates, predict)``: the fastest candidate that fits, by ``predict``; among equally
    fast ones the one needing the least memory; None when none fits."""
    __tracebackhide__ = True
    cases = [(LLAMA_70B, H100_CLUSTER, 64, 256)]
    if hidden:
        cases += [
            (GPT_13B, A100_CLUSTER, 16, 64),
            (LLAMA_70B, A100_CLUSTER, 128, 512),
            (LLAMA_70B, H100_CLUSTER, 8, 8),
        ]
        # a cluster whose memory is exactly what the fastest layout needs: "at most" fits
        fastest = min(
            _candidates(GPT_13B, H100_CLUSTER, 32, 64), key=lambda c: planner.predict(c)["step_seconds"]
        )
        cases.append((GPT_13B, {**H100_CLUSTER, "hbm": planner.predict(fastest)["memory_bytes"]}, 32, 64))
    for model, cluster, gpus, batch in cases:
        candidates = _candidates(model, cluster, gpus, batch)
        expected = _reference_best(candidates)
        got = fn([dict(c) for c in candidates], planner.predict)
        if got == expected and (got is None or type(got) is dict):
            continue
        name = next((n for n, c in CLUSTERS.items() if c["peak_flops"] == cluster["peak_flops"]), "a cluster")
        where = f"{model['layers']}-layer model on {gpus} GPUs of {name}, among {len(candidates)} candidates"
        if expected is None:
            fail(f"{where}: none of them fits; return None, got {got!r:.120}.")
        if type(got) is not dict or got not in candidates:
            fail(f"{where}: return one of the candidates (the dict itself), got {got!r:.120}.")
        mine, best = planner.predict(got), planner.predict(expected)
        if mine["memory_bytes"] > cluster["hbm"]:
            fail(
                f"{where}: your choice needs {mine['memory_bytes'] / 1e9:.1f} GB, more than the GPU's memory."
            )
        if mine["step_seconds"] == best["step_seconds"]:
            fail(f"{where}: your choice is as fast as the fastest that fits but needs more memory: among "
                 "equally fast layouts, pick the one that needs the least.")  # fmt: skip
        if _close(best["memory_bytes"], cluster["hbm"], 1e-12):
            fail(
                f"{where}: the fastest layout needs exactly the GPU's memory, and a layout fits when "
                "it needs at most that."
            )
        fail(f"{where}: your choice fits but is not the fastest that does.")
