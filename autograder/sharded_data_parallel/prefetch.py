"""Whether an FSDP model prefetches: each all_gather, as it starts and as it is waited on, in order
with the matrix products that use each layer's whole weight (noted by fsdp's `_LayersAlive`).

In forward, layer i + 1's all_gather must have started, and not been waited on, before layer i
computes; in backward, layer i - 1's before layer i computes its input's gradient. A blocking
all_gather is waited on as soon as it starts, so it never counts as a prefetch."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist

from ..checks import fail
from ..comm import _RecordedWork

# The ProcessGroup methods through which torch.distributed's all_gathers reach a backend (the
# first, torch 2.13's; the second, older torch's single-tensor form; the third, the list form).
_GATHERS = ("all_gather_single", "_allgather_base", "allgather")


@contextlib.contextmanager
def recording_gathers(events: list) -> Iterator[None]:
    """While active, every all_gather appends ``("gather", index)`` to ``events`` as it starts, and
    returns a handle that appends ``("wait", index)`` when first waited on (a blocking call waits
    at once). Each all_gather has finished when it returns, unknown to the caller."""
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


def expect_prefetch(where: str, step: int, events: list, forward_end: int, layers: int) -> None:
    """Check the order of one step's events: ``("gather", g)``, ``("wait", g)`` and
    ``("compute", layer)``; those before ``forward_end`` are forward's. The forward's gathers are
    layers 0, 1, ... in order, the backward's the last layer first."""
    __tracebackhide__ = True
    for phase, part, order in (
        ("forward", events[:forward_end], range(layers)),
        ("backward", events[forward_end:], range(layers - 1, -1, -1)),
    ):
        gathers = [g for kind, g in part if kind == "gather"]
        layer_of = dict(zip(gathers, order, strict=False))
        gather_of = {layer: g for g, layer in layer_of.items()}
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
