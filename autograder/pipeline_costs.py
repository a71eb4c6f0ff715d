"""Checks for notebook 06's costs: the bubble of a schedule, simulated from the order each stage
runs, and activation checkpointing's memory against recomputation, measured on the student's
own function."""

from __future__ import annotations

import gc
import math
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from .checks import counted, expect_floats, fail, private_generator
from .pipeline_stage import DIM, make_layer, written_order

_type = type


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
                    fail(
                        f"{what}: {key} starts at {start}; it can start at {ready:g}, when stage {s} is free "
                        f"and {needs} has finished."
                    )
                free = end


def measured_bubble(times: dict, num_stages: int) -> float:
    """The bubble fraction of a simulated run: the time each stage is idle over the run's length."""
    total = max(end for _, end in times.values()) - min(start for start, _ in times.values())
    busy = sum(end - start for (stage, _, _), (start, end) in times.items() if stage == 0)
    return (total - busy) / total


# -- exercise: activation checkpointing ----------------------------------------------------------


def _checkpoint_on_layers(checkpointed: Callable, num_layers: int, segments: int) -> dict:
    generator = private_generator()
    layers = nn.Sequential(*[make_layer(generator) for _ in range(num_layers)])
    x = torch.randn(5, DIM, generator=generator).requires_grad_(True)
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
    y = checkpointed(layers, x, segments)
    gc.collect()
    kept = sum(1 for ref in outputs if ref() is not None)
    phase[0] = "backward"
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
    for num_layers, segments in cases:
        what = f"checkpointed({num_layers} layers, {counted(segments, 'segment')})"
        predicted = _predicted(checkpoint_costs, num_layers, segments)  # before anything is measured
        got = _checkpoint_on_layers(checkpointed, num_layers, segments)
        plain = "the same layers without checkpointing"
        expect_floats(f"{what}: the output", got["y"][0], got["y"][1].detach(), plain, atol=1e-6)
        expect_floats(f"{what}: x's gradient", got["x.grad"][0], got["x.grad"][1], plain, atol=1e-6)
        for i, (actual, expected) in enumerate(got["grads"]):
            if actual is None:
                fail(f"{what}: layer {i // 2}'s parameters have no gradient.")
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
            fail(
                f"checkpoint_costs({num_layers}, {segments}) is {predicted!r:.80}; your checkpointed() kept "
                f"{got['kept']} layer outputs after the forward pass and ran {got['recomputed']} layers "
                f"again in the backward: expected the tuple {measured}."
            )
