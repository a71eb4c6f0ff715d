"""What notebook 06's code and checks run on: the model's layers, a pipeline `Stage` that traces
what autograd runs on it, and the orders of steps the tests give (GPipe's, and some written out by
hand)."""

from __future__ import annotations

import gc
import math
import time
import weakref
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from ..comm import event_number

DIM = 8  # every activation between layers and stages has DIM features
LAYERS_PER_STAGE = 2


def make_layer(generator: torch.Generator | None = None) -> nn.Sequential:
    """One layer of the course's model: ``tanh(x @ W.T + b)`` on ``DIM`` features."""
    layer = nn.Sequential(nn.Linear(DIM, DIM), nn.Tanh())
    if generator is not None:
        with torch.no_grad():
            layer[0].weight.copy_(torch.randn(DIM, DIM, generator=generator) / math.sqrt(DIM))
            layer[0].bias.copy_(torch.randn(DIM, generator=generator) / 4)
    return layer


class _Mark(torch.autograd.Function):
    """The identity, which notes in ``journal`` when a micro-batch enters the stage and when its
    backward has left it (the marker sits before the stage's first layer), with the rank's event
    number, which orders the steps among the messages `CommLog` records."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, anchor: torch.Tensor, journal: list, index: int) -> torch.Tensor:
        journal.append(("F", index, event_number()))
        ctx.journal, ctx.index = journal, index
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple:
        ctx.journal.append(("B", ctx.index, event_number()))
        return grad, None, None, None


class Stage(nn.Module):
    """The layers of one pipeline stage. ``stage(x)`` runs them; ``stage.trace`` lists, in the
    order they happened, ``("F", i)`` when the stage's i-th forward began and ``("B", i)`` when the
    backward of that forward's graph had gone through every layer of the stage. (The checks keep
    their own record, ``journal``, which ``stage.trace`` only copies.)"""

    def __init__(self, layers: Sequence[nn.Module], journal: list | None = None) -> None:
        super().__init__()
        self.layers = nn.Sequential(*layers)
        self._journal = [] if journal is None else journal
        # Not a parameter: it makes autograd run the marker's backward even where x needs no grad.
        self._anchor = torch.zeros((), requires_grad=True)

    @property
    def trace(self) -> list[tuple[str, int]]:
        return [(kind, i) for kind, i, _ in self._journal]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        index = sum(1 for kind, _, _ in self._journal if kind == "F")
        return self.layers(_Mark.apply(x, self._anchor, self._journal, index))


class _Pause(torch.autograd.Function):
    """The identity, which sleeps on the way forward and on the way back."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, forward_s: float, backward_s: float) -> torch.Tensor:
        time.sleep(forward_s)
        ctx.backward_s = backward_s
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple:
        time.sleep(ctx.backward_s)
        return grad, None, None


class Pause(nn.Module):
    """A layer that does nothing but take time: ``forward_s`` seconds in the forward pass and
    ``backward_s`` in the backward, as if its stage were a GPU's worth of real layers."""

    def __init__(self, forward_s: float, backward_s: float) -> None:
        super().__init__()
        self.forward_s, self.backward_s = forward_s, backward_s

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _Pause.apply(x, self.forward_s, self.backward_s)


def peak_alive(trace: Sequence[tuple[str, int]]) -> int:
    """The most micro-batches whose forward had run and whose backward had not finished, at once."""
    alive = peak = 0
    for kind, _ in trace:
        alive += 1 if kind == "F" else -1
        peak = max(peak, alive)
    return peak


class Held:
    """How many micro-batches' activations a stage holds, counted from the tensors themselves: a
    weak reference to the first layer's output of every forward, which lives as long as autograd
    keeps it for a backward (the stage's own output may be held for other reasons; this one is
    not)."""

    def __init__(self) -> None:
        self._outputs: list[weakref.ref] = []
        self.peak = 0

    def alive(self) -> int:
        return sum(1 for ref in self._outputs if ref() is not None)

    def counted(self) -> int:
        """Alive now, after collecting any cycle that would make it look more than it is."""
        alive = self.alive()
        if alive and alive >= self.peak:
            gc.collect()
            alive = self.alive()
        return alive

    def before_forward(self) -> None:
        self.peak = max(self.peak, self.counted() + 1)

    def after_forward(self, output: torch.Tensor) -> None:
        self._outputs.append(weakref.ref(output))


def traced_stage(generator: torch.Generator) -> tuple[Stage, list, list, Held]:
    """This rank's stage, the checks' own record of its steps, the rows of every input its first
    layer was given (in or out of ``stage(x)``), and the count of micro-batches it holds."""
    journal: list = []
    rows: list = []
    held = Held()
    stage = Stage([make_layer(generator) for _ in range(LAYERS_PER_STAGE)], journal)

    def before(module: nn.Module, args: tuple) -> None:
        rows.append(args[0].shape[0])
        held.before_forward()

    stage.layers[0].register_forward_pre_hook(before)
    stage.layers[0].register_forward_hook(lambda module, args, out: held.after_forward(out))
    return stage, journal, rows, held


def stages_from(states: Sequence[dict]) -> list[nn.Sequential]:
    """The stages of the unsharded model, rebuilt here from the ranks' state dicts."""
    stages = []
    for state in states:
        stage = nn.Sequential(*[make_layer() for _ in range(LAYERS_PER_STAGE)])
        stage.load_state_dict(state)
        stages.append(stage)
    return stages


def gpipe_order(num_stages: int, stage: int, num_microbatches: int) -> list[tuple[str, int]]:
    """GPipe: every micro-batch's forward, then every backward."""
    return [("F", i) for i in range(num_microbatches)] + [("B", i) for i in range(num_microbatches)]


def _parse(order: str) -> list[tuple[str, int]]:
    return [(step[0], int(step[1:])) for step in order.split()]


# Orders written out by hand, one line per stage, for tests of run_schedule that must not
# depend on a student's 1F1B: valid orders that interleave forwards and backwards in other ways.
WRITTEN_ORDERS = {
    "interleaved, 2 stages, 3 micro-batches": ["F0 F1 F2 B0 B1 B2", "F0 F1 B0 B1 F2 B2"],
    "interleaved, 3 stages, 4 micro-batches": [
        "F0 F1 B0 F2 F3 B1 B2 B3",
        "F0 F1 B0 F2 F3 B1 B2 B3",
        "F0 F1 B0 B1 F2 F3 B2 B3",
    ],
    "one micro-batch at a time, 4 stages, 2 micro-batches": ["F0 B0 F1 B1"] * 4,
    "interleaved, 4 stages, 6 micro-batches": [
        "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5",
        "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5",
        "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5",
        "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5",
    ],
    "GPipe on stage 0, one at a time on stage 1, 3 micro-batches": ["F0 F1 F2 B0 B1 B2", "F0 B0 F1 B1 F2 B2"],
}


def written_order(name: str) -> list[list[tuple[str, int]]]:
    return [_parse(line) for line in WRITTEN_ORDERS[name]]
