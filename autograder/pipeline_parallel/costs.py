"""Checks for notebook 06's costs: a split of the layers that balances the stages' time, the
bubble of a schedule, simulated from the order each stage runs, and activation checkpointing's
memory against recomputation, measured on the student's own function."""

from __future__ import annotations

import contextlib
import gc
import itertools
import math
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.utils.checkpoint
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from ..checks import counted, expect_floats, fail, private_generator
from .stage import DIM, make_layer, written_order

_type = type


# -- exercise: split the layers ------------------------------------------------------------------


def slowest_stage_at_best(costs: Sequence[float], num_stages: int) -> float:
    """The cost of the slowest stage in the best split of ``costs`` into ``num_stages`` runs of
    consecutive layers, each of at least one layer (by dynamic programming over prefixes)."""
    prefix = list(itertools.accumulate(costs, initial=0.0))
    n = len(costs)
    # best[k][j]: the slowest of k stages holding the first j layers, at best
    best = [[math.inf] * (n + 1) for _ in range(num_stages + 1)]
    best[0][0] = 0.0
    for k in range(1, num_stages + 1):
        for j in range(k, n + 1):
            best[k][j] = min(max(best[k - 1][i], prefix[j] - prefix[i]) for i in range(k - 1, j))
    return best[num_stages][n]


def _costs(costs: Sequence[float]) -> str:
    shown = ", ".join(f"{c:g}" for c in costs[:12])
    return f"[{shown}{', ...' if len(costs) > 12 else ''}] ({len(costs)} layers)"


def check_split_layers(split_layers: Callable, cases: Sequence[tuple[Sequence[float], int]]) -> None:
    """``split_layers(costs, num_stages)`` is a list of ``num_stages`` ranges, consecutive, covering
    every layer once, none empty, whose slowest stage (the largest sum of its layers' costs) is as
    fast as any split's; fewer layers than stages is a ValueError."""
    __tracebackhide__ = True
    for costs, num_stages in cases:
        num_layers = len(costs)
        what = f"split_layers({_costs(costs)}, {num_stages})"
        if num_layers < num_stages:
            try:
                got = split_layers(list(costs), num_stages)
            except ValueError:
                continue
            fail(
                f"{what} returned {got!r:.100}: with fewer layers than stages, raise a ValueError "
                "that says so."
            )
        got = split_layers(list(costs), num_stages)
        if _type(got) is not list or len(got) != num_stages or any(_type(r) is not range for r in got):
            fail(f"{what}: expected a list of {num_stages} ranges, got {got!r:.120}.")
        if any(r.step != 1 for r in got):
            fail(f"{what}: {got}: a stage holds consecutive layers (ranges with step 1).")
        start = 0
        for stage, layers in enumerate(got):
            if layers.start != start:
                missing = "skips" if layers.start > start else "repeats"
                fail(
                    f"{what}: stage {stage} starts at layer {layers.start}, so the split {missing} "
                    f"layers: {got}."
                )
            if len(layers) == 0:
                fail(f"{what}: stage {stage} holds no layer: {got}. Every stage holds at least one.")
            start = layers.stop
        if start != num_layers:
            fail(f"{what}: the stages hold layers 0 to {start - 1} of the model's {num_layers}: {got}.")
        stage_costs = [sum(costs[k] for k in layers) for layers in got]
        slowest, best = max(stage_costs), slowest_stage_at_best(costs, num_stages)
        if not math.isclose(slowest, best, rel_tol=1e-9, abs_tol=1e-12) and slowest > best:
            by_count = ""
            if max(len(r) for r in got) - min(len(r) for r in got) <= 1:
                by_count = (
                    " Balancing the number of layers balances the time only when every layer costs the same."
                )
            size = num_layers // num_stages
            if all(len(r) == size for r in got[:-1]) and len(got[-1]) > size + 1:
                by_count = (
                    f" The first {num_stages - 1} stages hold {counted(size, 'layer')} each and leave "
                    f"the last stage every layer they did not take ({len(got[-1])}): spread the remainder, "
                    "by what the layers cost."
                )
            fail(
                f"{what} is {got}: its stages cost {[round(c, 6) for c in stage_costs]}, and the slowest, "
                f"{slowest:g}, sets the pace of the whole pipeline; another split's slowest stage costs "
                f"{best:g}.{by_count}"
            )


# -- exercise: the bubble, from the formula and from a simulated run -----------------------------


def _dependencies(key: tuple, num_stages: int) -> list[tuple]:
    """What must finish before step ``key`` = (stage, kind, micro-batch) may start, on other stages."""
    stage, kind, i = key
    if kind == "F":
        return [(stage - 1, "F", i)] if stage > 0 else []
    return [(stage + 1, "B", i)] if stage < num_stages - 1 else [(stage, "F", i)]


def check_simulate(simulate: Callable, names: Sequence[str], forward: float = 1, backward: float = 2) -> None:
    """Check ``simulate(orders, forward, backward)`` on orders written out by hand: every step of every stage
    gets a (start, end) lasting ``forward`` or ``backward``; a stage runs its steps in its order,
    one at a time; a step starts as soon as the stage is free and what it needs has finished: the
    previous stage's forward of the same micro-batch, or the next stage's backward of it (on the
    last stage, its own forward)."""
    __tracebackhide__ = True
    for name in names:
        orders = written_order(name) if isinstance(name, str) else name
        label = name if isinstance(name, str) else f"{len(orders)} stages"
        what = f"simulate({label}, forward={forward:g}, backward={backward:g})"
        times = simulate([list(order) for order in orders], forward=forward, backward=backward)
        want_keys = {(s, kind, i) for s, order in enumerate(orders) for kind, i in order}
        if _type(times) is not dict or set(times) != want_keys:
            got = sorted(times)[:4] if _type(times) is dict else _type(times).__name__
            fail(
                f"{what}: expected a dict with a (stage, kind, micro-batch) key for every step, such as "
                f"{sorted(want_keys)[:2]}; got {got!r:.160}."
            )
        for s, order in enumerate(orders):
            free = 0.0
            for kind, i in order:
                key = (s, kind, i)
                start, end = times[key]
                duration = forward if kind == "F" else backward
                if not math.isclose(end - start, duration, abs_tol=1e-9):
                    fail(
                        f"{what}: {key} runs from {start} to {end}; a "
                        f"{'forward' if kind == 'F' else 'backward'} lasts {duration:g}."
                    )
                ready = max([free] + [times[d][1] for d in _dependencies(key, len(orders))])
                if not math.isclose(start, ready, abs_tol=1e-9):
                    needs = ", ".join(str(d) for d in _dependencies(key, len(orders))) or "nothing else"
                    ticks = ""
                    if start > ready and float(start).is_integer() and not float(ready).is_integer():
                        ticks = (
                            " Your clock seems to move in whole time units; a step starts the moment what it "
                            "waits for ends, whole or not."
                        )
                    fail(
                        f"{what}: {key} starts at {start}; it can start at {ready:g}, when stage {s} is free "
                        f"and {needs} has finished.{ticks}"
                    )
                free = end


def measured_bubble(times: dict, num_stages: int) -> float:
    """The bubble fraction of a simulated run: the time stage (or device) 0 is idle over the run's
    length. (Keys are (stage, kind, micro-batch), or (device, kind, micro-batch, chunk).)"""
    total = max(end for _, end in times.values()) - min(start for start, _ in times.values())
    busy = sum(end - start for key, (start, end) in times.items() if key[0] == 0)
    return (total - busy) / total


# -- exercise: interleaved stages ----------------------------------------------------------------


def interleaved_order(
    num_devices: int, device: int, num_microbatches: int, num_chunks: int
) -> list[tuple[str, int, int]]:
    """GPipe with interleaved stages: each device holds ``num_chunks`` chunks of layers (device d,
    chunk c is virtual stage c * num_devices + d). Forwards go in groups of ``num_devices``
    micro-batches, chunk after chunk; then the backwards, in the same groups, the last chunk first."""
    p, m, v = num_devices, num_microbatches, num_chunks
    groups = [range(start, min(start + p, m)) for start in range(0, m, p)]
    forwards = [("F", i, c) for group in groups for c in range(v) for i in group]
    backwards = [("B", i, c) for group in groups for c in reversed(range(v)) for i in group]
    return forwards + backwards


def _chunk_dependencies(key: tuple, num_devices: int, num_chunks: int) -> list[tuple]:
    """What must finish before step ``key`` = (device, kind, micro-batch, chunk) may start. With the
    backward split (zero bubble), B is the input's gradient, waiting for the next virtual stage's B
    only, and W the weights', waiting for its own B."""
    device, kind, i, chunk = key
    last = num_devices - 1
    if kind == "F":
        if device > 0:
            return [(device - 1, "F", i, chunk)]
        return [(last, "F", i, chunk - 1)] if chunk > 0 else []
    if kind == "W":
        return [(device, "B", i, chunk)]
    if device < last:
        return [(device + 1, "B", i, chunk)]
    return [(0, "B", i, chunk + 1)] if chunk < num_chunks - 1 else [(device, "F", i, chunk)]


def simulate_steps(orders: Sequence[Sequence[tuple[str, int, int]]], num_chunks: int, seconds: dict) -> dict:
    """When each step of these orders starts and ends, each as early as its device is free and
    what it waits for has finished; ``seconds`` gives each kind of step ("F", "B", "W") its length.
    The checks' own simulation, for predicted step times."""
    times: dict = {}
    done, free = [0] * len(orders), [0.0] * len(orders)
    while any(done[d] < len(order) for d, order in enumerate(orders)):
        placed = False
        for d, order in enumerate(orders):
            if done[d] == len(order):
                continue
            key = (d, *order[done[d]])
            waits = _chunk_dependencies(key, len(orders), num_chunks)
            if all(w in times for w in waits):
                start = max([free[d]] + [times[w][1] for w in waits])
                free[d] = start + seconds[key[1]]
                times[key] = (start, free[d])
                done[d], placed = done[d] + 1, True
        if not placed:
            raise ValueError("these orders wait on each other forever")
    return times


def reference_simulate_interleaved(
    orders: Sequence[Sequence[tuple[str, int, int]]], num_chunks: int, forward: float, backward: float
) -> dict:
    """``simulate_steps`` with a whole backward of one length."""
    return simulate_steps(orders, num_chunks, {"F": forward, "B": backward})


def check_simulate_interleaved(
    simulate_interleaved: Callable,
    cases: Sequence[tuple[int, int, int]],
    forward: float = 0.5,
    backward: float = 1.0,
) -> None:
    """Check ``simulate_interleaved(orders, num_chunks, forward, backward)`` on the interleaved
    orders of ``interleaved_order`` for each (devices, chunks, micro-batches) case: every step a
    (start, end), a device running its steps one at a time in its order, each as early as the
    device is free and what it needs has finished."""
    __tracebackhide__ = True
    for p, v, m in cases:
        orders = [interleaved_order(p, d, m, v) for d in range(p)]
        what = (
            f"simulate_interleaved({p} devices x {v} chunks, {_microbatches(m)}, forward={forward:g}, "
            f"backward={backward:g})"
        )
        times = simulate_interleaved([list(order) for order in orders], v, forward=forward, backward=backward)
        expect_simulated(what, times, orders, v, {"F": forward, "B": backward})


def _waited(key: tuple, needs: list[tuple]) -> str:
    waited = ", ".join(str(n) for n in needs) or "nothing else"
    return f"when device {key[0]} is free and {waited} has finished."


def expect_simulated(
    what: str,
    times: Any,
    orders: Sequence[Sequence[tuple[str, int, int]]],
    num_chunks: int,
    seconds: dict,
    why: Callable[[tuple, list[tuple]], str] = _waited,
) -> None:
    """Check a simulation's ``times`` of these orders: a (start, end) for every step, of its kind's
    length in ``seconds``, each device running its steps one at a time in its order, each as early
    as the device is free and what it needs has finished (``why`` says what that was)."""
    __tracebackhide__ = True
    want_keys = {(d, *step) for d, order in enumerate(orders) for step in order}
    if _type(times) is not dict or set(times) != want_keys:
        got = sorted(times)[:3] if _type(times) is dict else _type(times).__name__
        fail(
            f"{what}: expected a dict with a (device, kind, micro-batch, chunk) key for every step, "
            f"such as {sorted(want_keys)[:2]}; got {got!r:.160}."
        )
    p = len(orders)
    for d, order in enumerate(orders):
        free = 0.0
        for step in order:
            key = (d, *step)
            start, end = times[key]
            if not math.isclose(end - start, seconds[step[0]], abs_tol=1e-9):
                fail(f"{what}: {key} runs from {start:g} to {end:g}; it lasts {seconds[step[0]]:g}.")
            needs = _chunk_dependencies(key, p, num_chunks)
            ready = max([free] + [times[n][1] for n in needs])
            if not math.isclose(start, ready, abs_tol=1e-9):
                fail(f"{what}: {key} starts at {start:g}; it can start at {ready:g}, {why(key, needs)}")
            free = end


def _microbatches(n: int) -> str:
    return "1 micro-batch" if n == 1 else f"{n} micro-batches"


# -- exercise: activation checkpointing ----------------------------------------------------------


@contextlib.contextmanager
def _torch_checkpoint_watched(used: list[str]) -> Iterator[None]:
    """Notes in ``used`` any use of torch's own checkpointing (both kinds, however it is reached:
    `checkpoint`, `checkpoint_sequential`, a wrapper around them), which the exercise asks the
    student to write instead."""
    module = torch.utils.checkpoint
    reentrant, non_reentrant = module.CheckpointFunction, module._checkpoint_without_reentrant_generator

    class Reentrant:
        @staticmethod
        def apply(*args: Any) -> Any:
            used.append("reentrant")
            return reentrant.apply(*args)

    def watched(*args: Any, **kwargs: Any) -> Any:
        used.append("non-reentrant")
        return non_reentrant(*args, **kwargs)

    module.CheckpointFunction, module._checkpoint_without_reentrant_generator = Reentrant, watched
    try:
        yield
    finally:
        module.CheckpointFunction, module._checkpoint_without_reentrant_generator = reentrant, non_reentrant


def measure_checkpointing(checkpointed: Callable, num_layers: int, segments: int) -> tuple[int, int]:
    """``(kept, recomputed)`` of ``checkpointed`` on a stack of ``num_layers`` layers: the layers'
    outputs still alive once its forward has returned, and the layers started again in backward."""
    with _collecting_only_what_is_made():
        got = _checkpoint_on_layers(checkpointed, num_layers, segments, input_grad=True)
    return got["kept"], got["recomputed"]


@contextlib.contextmanager
def _collecting_only_what_is_made() -> Iterator[None]:
    """Within, ``gc.collect()`` looks only at objects made within: what existed before is set aside
    (``gc.freeze``). A collection of everything a kernel holds with torch loaded takes a tenth of a
    second or more, and a check collects after each forward pass it measures. (In a rank, the fork
    server has set aside what it held already: left as it is.)"""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _checkpoint_on_layers(checkpointed: Callable, num_layers: int, segments: int, input_grad: bool) -> dict:
    generator = private_generator()
    layers = nn.Sequential(*[make_layer(generator) for _ in range(num_layers)])
    # A stage's input needs a gradient on every stage but the first, which is given the data.
    x = torch.randn(5, DIM, generator=generator).requires_grad_(input_grad)
    upstream = torch.randn(5, DIM, generator=generator)
    phase, calls, outputs = ["forward"], {"forward": 0, "backward": 0}, []

    def count(module: nn.Module, args: Any) -> None:
        # Counted as a layer starts: torch's checkpoint may stop a recomputation inside the
        # segment's last layer, once it has every tensor the backward needs.
        calls[phase[0]] += 1

    def keep(module: nn.Module, args: Any, out: torch.Tensor) -> None:
        if phase[0] == "forward":
            outputs.append(weakref.ref(out))

    handles = [layer.register_forward_pre_hook(count) for layer in layers]
    handles += [layer.register_forward_hook(keep) for layer in layers]
    used: list[str] = []
    with _torch_checkpoint_watched(used):
        y = checkpointed(layers, x, segments)
        gc.collect()
        kept = sum(1 for ref in outputs if ref() is not None)
        phase[0] = "backward"
        if isinstance(y, torch.Tensor) and y.requires_grad:  # else no parameter gets a gradient
            (y * upstream).sum().backward()
    for handle in handles:
        handle.remove()
    reference = nn.Sequential(*[make_layer() for _ in range(num_layers)])
    reference.load_state_dict(layers.state_dict())
    x_ref = x.detach().clone().requires_grad_(True)
    y_ref = reference(x_ref)
    (y_ref * upstream).sum().backward()
    return {
        "y": (y, y_ref),
        "x.grad": (x.grad, x_ref.grad),
        "grads": [(p.grad, q.grad) for p, q in zip(layers.parameters(), reference.parameters(), strict=True)],
        "kept": kept,
        "torch": used[0] if used else None,
        "forwards": calls["forward"],
        "recomputed": calls["backward"],
    }


class _Forbidden(Exception):
    pass


class _NoTensors(TorchDispatchMode):
    """Fails on any tensor operation: a prediction is arithmetic, not a measurement."""

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        raise _Forbidden(str(func))


def _predicted(checkpoint_costs: Callable, num_layers: int, segments: int) -> Any:
    __tracebackhide__ = True
    try:
        with _NoTensors():
            return checkpoint_costs(num_layers, segments)
    except _Forbidden:
        pass
    fail(
        f"checkpoint_costs({num_layers}, {segments}) computed with tensors: predict the costs from the "
        "numbers of layers and segments, without running or measuring anything."
    )


def check_checkpointing(
    checkpointed: Callable, checkpoint_costs: Callable, cases: Sequence[tuple[int, int]]
) -> None:
    """Check ``checkpointed(layers, x, segments)`` and ``checkpoint_costs(num_layers, segments)``:
    the output and every gradient as without checkpointing; each layer run once in the forward
    pass; some layers run again in the backward (with more than one segment); and the numbers of
    layer outputs kept and of layers run again in the backward pass, as measured, what
    ``checkpoint_costs`` predicted."""
    __tracebackhide__ = True
    for (num_layers, segments), input_grad in itertools.product(cases, (True, False)):
        what = f"checkpointed({num_layers} layers, {counted(segments, 'segment')})"
        if not input_grad:
            what += " on an input that needs no gradient (a first stage's data)"
        predicted = _predicted(checkpoint_costs, num_layers, segments)  # before anything is measured
        with _collecting_only_what_is_made():
            got = _checkpoint_on_layers(checkpointed, num_layers, segments, input_grad)
        if got["torch"]:
            fail(
                f"{what} ran torch's own {got['torch']} checkpointing (torch.utils.checkpoint): "
                "write the checkpointing yourself, as the exercise asks."
            )
        plain = "the same layers without checkpointing"
        expect_floats(f"{what}: the output", got["y"][0], got["y"][1].detach(), plain, atol=1e-6)
        if input_grad:
            expect_floats(f"{what}: x's gradient", got["x.grad"][0], got["x.grad"][1], plain, atol=1e-6)
        for i, (actual, expected) in enumerate(got["grads"]):
            if actual is None:
                why = (
                    ""
                    if input_grad
                    else (
                        " Without an input that needs one, does your checkpointing still connect the "
                        "parameters of its segments to the output's graph?"
                    )
                )
                fail(f"{what}: layer {i // 2}'s parameters have no gradient.{why}")
            expect_floats(f"{what}: layer {i // 2}'s gradients", actual, expected, plain, atol=1e-6)
        if got["forwards"] != num_layers:
            fail(
                f"{what}: the forward pass ran {got['forwards']} layers; the model has {num_layers}: run "
                "each once."
            )
        if segments > 1 and got["recomputed"] == 0:
            fail(
                f"{what}: no layer ran again in the backward pass, and {got['kept']} of the "
                f"{num_layers} layers' outputs were still held after the forward pass: nothing was "
                "checkpointed."
            )
        measured = (got["kept"], got["recomputed"])
        size = num_layers // segments
        if measured not in ((segments - 1 + size, num_layers - size), (segments, num_layers)):
            fail(
                f"{what} kept {got['kept']} layer outputs after the forward pass and ran {got['recomputed']} "
                f"layers again in the backward: not what checkpointing {counted(segments, 'segment')} of "
                f"{size} layers costs. Does it use `segments`, and checkpoint every segment (but perhaps the "
                "last)?"
            )
        if (
            _type(predicted) is not tuple
            or [_type(n) for n in predicted] != [int, int]
            or predicted != measured
        ):
            unchecked, every = (segments - 1 + size, num_layers - size), (segments, num_layers)
            other = ""
            if measured == every and predicted == unchecked != every:
                other = (
                    " That is the cost of leaving the last segment unchecked (as torch's "
                    "checkpoint_sequential does); your checkpointed() checkpoints every segment."
                )
            elif measured == unchecked and predicted == every != unchecked:
                other = (
                    " That is the cost of checkpointing every segment; your checkpointed() leaves the last "
                    "one unchecked."
                )
            fail(
                f"checkpoint_costs({num_layers}, {segments}) is {predicted!r:.80}; your checkpointed() kept "
                f"{got['kept']} layer outputs after the forward pass and ran {got['recomputed']} layers "
                f"again in the backward: expected the tuple {measured}.{other}"
            )
