"""Whether an FSDP model prefetches: each all_gather, as it starts and as it is waited on, in order
with the matrix products that use each layer's whole weight (noted by fsdp's `_LayersAlive`).

In forward, layer i + 1's all_gather must have started, and not been waited on, before layer i
computes; in backward, layer i - 1's before layer i computes its input's gradient. A blocking
all_gather is waited on as soon as it starts, so it never counts as a prefetch. Which layer an
all_gather brought is read from what it gathered, so the order in which a model starts them is its
own: a layer that starts the next one's all_gather before waiting for its own still prefetches."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch.utils._python_dispatch import _disable_current_modes

from ..checks import fail, tensors_in
from ..comm import _RecordedWork

# The ProcessGroup methods through which torch.distributed's all_gathers reach a backend (the
# first, torch 2.13's; the second, older torch's single-tensor form; the third, the list form).
_GATHERS = ("all_gather_single", "_allgather_base", "allgather")


@contextlib.contextmanager
def recording_gathers(
    events: list,
    identify: Callable[[list[torch.Tensor]], list[int]] | None = None,
    layers_of: dict[int, list[int]] | None = None,
) -> Iterator[None]:
    """While active, every all_gather appends ``("gather", index)`` to ``events`` as it starts, and
    returns a handle that appends ``("wait", index)`` when first waited on (a blocking call waits
    at once). Each all_gather has finished when it returns, unknown to the caller. Given
    ``identify`` (the gathered tensors -> the layers whose whole weight they hold), ``layers_of``
    is filled with each all_gather's layers."""
    waited: list[bool] = []
    # Taken from the class's own dict: getattr gives the plain function, which, put back, would no
    # longer bind to a group.
    methods = vars(dist.ProcessGroup)
    originals = {name: methods[name] for name in _GATHERS if name in methods}

    def wrapped(real: Any) -> Any:
        def gather(group: Any, *args: Any, **kwargs: Any) -> Any:
            work = real.__get__(group)(*args, **kwargs)
            # The gathered weights take their memory when the all_gather starts, whenever Gloo's
            # worker thread fills it: finishing it now makes the count of whole layers alive
            # (fsdp's `_LayersAlive`) the same on a busy machine as on an idle one. The caller's
            # own wait, which the order is checked on, is still noted when it comes.
            work.wait()
            waited.append(False)
            if identify is not None and layers_of is not None and args:
                with _disable_current_modes():  # reading what arrived is no operation of the rank's
                    layers_of[len(waited) - 1] = identify(tensors_in(args[0]))
            events.append(("gather", len(waited) - 1))
            nothing: list = []  # the data is the caller's from the start: nothing to deliver on wait
            return _RecordedWork(work, nothing, nothing, events, waited, len(waited) - 1)

        return gather

    for name, real in originals.items():
        setattr(dist.ProcessGroup, name, wrapped(real))
    try:
        yield
    finally:
        for name, real in originals.items():
            setattr(dist.ProcessGroup, name, real)


def expect_prefetch(
    where: str,
    step: int,
    events: list,
    forward_end: int,
    layers: int,
    layers_of: dict[int, list[int]] | None = None,
) -> None:
    """Check the order of one step's events: ``("gather", g)``, ``("wait", g)`` and
    ``("compute", layer)``; those before ``forward_end`` are forward's. ``layers_of[g]`` names the
    layers all_gather g brought, read from its data; an all_gather it does not name is taken, by
    its place among the phase's all_gathers, to be layer 0, 1, ... in forward and the last layer
    first in backward."""
    __tracebackhide__ = True
    layers_of = layers_of or {}
    for phase, part, order in (
        ("forward", events[:forward_end], range(layers)),
        ("backward", events[forward_end:], range(layers - 1, -1, -1)),
    ):
        gathers = [g for kind, g in part if kind == "gather"]
        gather_of: dict[int, int] = {}
        for g in gathers:  # the phase's first all_gather of each layer, as its data says
            for layer in layers_of.get(g, []):
                gather_of.setdefault(layer, g)
        for g, layer in zip(gathers, order, strict=False):  # the others, by their place
            if not layers_of.get(g):
                gather_of.setdefault(layer, g)
        nxt = 1 if phase == "forward" else -1
        for layer in order:
            following = layer + nxt
            if not 0 <= following < layers:
                continue
            computed = next((i for i, e in enumerate(part) if e == ("compute", layer)), None)
            if computed is None:
                continue  # no product with this layer's whole weight seen: other checks speak
            g = gather_of.get(following)
            started = g is not None and ("gather", g) in part[:computed]
            if not started:
                fail(
                    f"{where}: in step {step}'s {phase}, layer {layer} computed before layer {following}'s "
                    f"all_gather started. Prefetch: start layer {following}'s all_gather (async_op=True) "
                    f"before layer {layer} computes, so that its data arrives meanwhile."
                )
            if ("wait", g) in part[:computed]:
                fail(
                    f"{where}: in step {step}'s {phase}, layer {following}'s all_gather was started before "
                    f"layer {layer} computed, but waited on (or blocking) before it did: nothing overlaps. "
                    f"Start it with async_op=True, and wait on its handle only when layer {following} "
                    "needs it."
                )


def compute_events(
    tensors: list[torch.Tensor], samples: torch.Tensor, per_layer: int, smallest: int
) -> list[tuple[str, int]]:
    """``("compute", layer)`` for each layer whose whole weight one of these tensors holds (all of
    its ``per_layer`` samples, in ``samples``)."""
    found: set[int] = set()
    for t in tensors:
        if t.is_floating_point() and t.numel() >= smallest:
            inside = torch.isin(samples, t.detach().reshape(-1).float()).view(-1, per_layer).all(dim=1)
            found |= set(inside.nonzero().flatten().tolist())
    return [("compute", layer) for layer in sorted(found)]
