"""Check of notebook 07's FSDP MLP: trained on sharded layers it equals one process's SGD, each rank
holds at most two layers' whole weights at once (watched after every tensor operation), prefetches
(each all_gather started before the layer before it computes, and waited on after: `prefetch`), and
each step moves 3 Ψ."""

from __future__ import annotations

import gc
import math
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from ..checks import counted, fail, fresh_seed, private_generator, run_ranks, tensors_in
from ..comm import CommLog
from ..data_parallel import mse
from .common import _compare, _counts, _params_like, _type, _volumes
from .prefetch import compute_events, expect_prefetch, recording_gathers


def make_layers(dims: Sequence[int], seed: int) -> list[nn.Linear]:
    """Linear layers dims[0] -> dims[1] -> ..., drawn from ``seed`` (the same on every rank)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return [nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:], strict=False)]


def _forward_alone(layers: list[nn.Linear], x: torch.Tensor) -> torch.Tensor:
    for i, layer in enumerate(layers):
        x = layer(x)
        if i < len(layers) - 1:
            x = torch.nn.functional.gelu(x)
    return x


_EMPTY_OPS = frozenset(
    {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty_permuted"}
)
_PRODUCTS = frozenset({"mm", "addmm", "bmm", "baddbmm", "matmul", "mv", "addmv", "linear"})
_SAMPLES = 16  # values of each weight, spread over it, that a tensor holding it whole must hold


class _LayersAlive(TorchDispatchMode):
    """Notes which layers have their whole weight alive in some tensor made while it is active,
    after each operation that could add one (one that makes a large tensor, a collective, and the
    operation after a collective, by which the collective's data has arrived). A weight is whole in
    a tensor that holds all of 16 of its values spread evenly over it: a shard, a contiguous slice
    of at most about half of it, cannot. ``peak`` is the most layers at once, ``when`` the
    operation that reached it.

    Memory that ``torch.empty`` hands out holds whatever was there before, maybe a freed layer:
    such tensors are filled with NaN as they are made, which is as good a content as any."""

    def __init__(self, weights: list[torch.Tensor]) -> None:
        super().__init__()
        self.tracked: list[weakref.ref] = []
        self.peak, self.when, self.layers_at_peak = 0, "", ()
        self.after_collective = False
        self.events: list | None = None  # where products with a whole weight are noted, if given
        self.set_weights(weights)

    def set_weights(self, weights: list[torch.Tensor]) -> None:
        samples = []
        for w in weights:
            flat = w.detach().reshape(-1)
            samples.append(flat[torch.linspace(0, flat.numel() - 1, _SAMPLES).round().long()])
        self.samples = torch.cat(samples).float()
        self.smallest = min(w.numel() for w in weights)

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        name = func.overloadpacket.__name__
        if self.events is not None and name in _PRODUCTS:
            self.events += compute_events(tensors_in(args), self.samples, _SAMPLES, self.smallest)
        out = func(*args, **(kwargs or {}))
        made = [t for t in tensors_in(out) if t.is_floating_point()]
        if name in _EMPTY_OPS:
            for t in made:
                t.fill_(math.nan)
        large = [t for t in made if t.numel() >= self.smallest]
        self.tracked += [weakref.ref(t) for t in large]
        collective = func.namespace in ("c10d", "_c10d_functional")
        if large or collective or self.after_collective:
            self.look(name)
        self.after_collective = collective
        return out

    def look(self, after: str) -> None:
        whole = self._whole_now()
        # Gloo's worker thread may hold a finished collective's tensors for a moment after its
        # wait() returned: more than two layers are counted only if they stay alive a little.
        for _ in range(10 if len(whole) > max(self.peak, 2) else 0):
            gc.collect()
            time.sleep(0.02)
            whole = min(whole, self._whole_now(), key=len)
            if len(whole) <= max(self.peak, 2):
                break
        if len(whole) > self.peak:
            self.peak, self.when, self.layers_at_peak = len(whole), after, tuple(sorted(whole))

    def layers_in(self, tensors: list[torch.Tensor]) -> list[int]:
        """The layers whose whole weight these tensors hold between them (an all_gather's output,
        one tensor or a list of pieces)."""
        found = torch.zeros(self.samples.numel(), dtype=torch.bool)
        for t in tensors:
            if t.is_floating_point():
                found |= torch.isin(self.samples, t.detach().reshape(-1).float())
        return found.view(-1, _SAMPLES).all(dim=1).nonzero().flatten().tolist()

    def _whole_now(self) -> set[int]:
        alive = [t for t in (ref() for ref in self.tracked) if t is not None]
        self.tracked = [weakref.ref(t) for t in alive]
        whole: set[int] = set()
        for t in alive:
            found = torch.isin(self.samples, t.detach().reshape(-1).float()).view(-1, _SAMPLES).all(dim=1)
            whole |= set(found.nonzero().flatten().tolist())
        return whole


def _gather_layers(
    shards: list[torch.Tensor], layers_shape: list[tuple], world_size: int
) -> list[torch.Tensor]:
    """The full weights and biases, from every rank's shards, in the layout the exercise names."""
    full = []
    for shard, (out_f, in_f) in zip(shards, layers_shape, strict=True):
        pieces = [torch.empty_like(shard) for _ in range(world_size)]
        dist.all_gather(pieces, shard.detach().contiguous())
        flat = torch.cat(pieces)
        full += [
            flat[: out_f * in_f].view(out_f, in_f).clone(),
            flat[out_f * in_f : out_f * in_f + out_f].clone(),
        ]
    return full


def _fsdp_on_rank(
    rank: int, world_size: int, make_model: Callable, dims: list, rows: int, steps: int, lr: float, seed: int
) -> dict:
    layers = make_layers(dims, seed)
    shapes = [(layer.out_features, layer.in_features) for layer in layers]
    originals = [weakref.ref(p) for layer in layers for p in layer.parameters()]
    alive = _LayersAlive([layer.weight for layer in layers])
    with alive:  # what the constructor makes is tracked; it is given whole layers, so not measured
        model = make_model(layers)
    alive.peak, alive.when = 0, ""
    del layers
    gc.collect()
    keeps_full = any(ref() is not None for ref in originals)
    shards = list(getattr(model, "shards", None) or [])
    expected = [-(-(o * i + o) // world_size) for o, i in shapes]
    if len(shards) != len(shapes) or any(
        _type(s) is not nn.Parameter or s.dim() != 1 or s.numel() != n
        for s, n in zip(shards, expected, strict=False)
    ):
        got = [tuple(s.shape) if isinstance(s, torch.Tensor) else _type(s).__name__ for s in shards]
        raise TypeError(
            f"model.shards should be {len(shapes)} one-dimensional nn.Parameters of {expected} elements "
            f"(a layer's weight and bias, flattened, padded, split {world_size} ways); got {got}"
        )
    # What each shard needs, and the storage it keeps alive: a slice of the padded whole buffer is
    # a view, which keeps all of it on every rank.
    storages = [(s.numel() * s.element_size(), s.untyped_storage().nbytes()) for s in shards]
    generator = private_generator()
    data, volumes, counts, peaks, unsharded, forward_counts, orders = [], [], [], [], [], [], []
    for _ in range(steps):
        x, y = (
            torch.randn(rows, dims[0], generator=generator),
            torch.randn(rows, dims[-1], generator=generator),
        )
        data.append((x, y))
        events: list = []
        layers_of: dict[int, list[int]] = {}  # each all_gather's layers, read from what it brought
        alive.events = events
        with (
            CommLog(count_collectives=False) as log,
            recording_gathers(events, alive.layers_in, layers_of),
            alive,
        ):
            loss = mse(model(x), y)
            in_forward = len(log.calls)  # the loss issues none: these are forward's
            forward_end = len(events)
            loss.backward()
            alive.look("backward")
        alive.events = None
        orders.append((events, forward_end, layers_of))
        summary = log.summary()
        volumes.append(_volumes(summary))
        counts.append(_counts(summary))
        forward_counts.append(_counts({"calls": summary["calls"][:in_forward]}))
        peaks.append((alive.peak, alive.when, alive.layers_at_peak))
        grads = [s.grad for s in shards]
        if any(g is None or g.shape != s.shape for g, s in zip(grads, shards, strict=True)):
            unsharded.append([None if g is None else tuple(g.shape) for g in grads])
            break
        with torch.no_grad():
            for s in shards:
                s -= lr * s.grad
                s.grad = None
        full = _gather_layers(shards, shapes, world_size)
        alive.set_weights(full[::2])
        alive.peak, alive.when = 0, ""
    return {
        "params": _gather_layers(shards, shapes, world_size),
        "data": data,
        "volumes": volumes,
        "counts": counts,
        "forward_counts": forward_counts,
        "peaks": peaks,
        "keeps_full": keeps_full,
        "storages": storages,
        "bad_grads": unsharded,
        "orders": orders,
    }


def check_fsdp(
    make_model: Callable,
    world_sizes: Sequence[int] = (2,),
    dims: Sequence[int] = (16, 16, 16, 16, 16),
    rows: int = 4,
    steps: int = 2,
    lr: float = 0.1,
) -> None:
    """Check an FSDP model, ``make_model(layers)``: trained with SGD on its ``shards`` for ``steps``
    steps, its layers equal one process's on every rank's batch together; each rank holds the whole
    weights of at most two layers at once, prefetches the next layer in forward and the previous one
    in backward, and each step moves 3 Ψ (all_gather in forward and in backward, reduce_scatter of
    the gradients)."""
    __tracebackhide__ = True
    name = getattr(make_model, "__name__", "the model")
    seed = fresh_seed() % (1 << 31)
    numel = sum(a * b + b for a, b in zip(dims[:-1], dims[1:], strict=False))
    for world_size in world_sizes:
        what = f"{name} on {counted(world_size, 'rank')}, layers {' -> '.join(map(str, dims))}"
        per_rank = run_ranks(
            _fsdp_on_rank, world_size, make_model, list(dims), rows, steps, lr, seed, what=name
        )
        padded = sum(
            -(-(a * b + b) // world_size) * world_size for a, b in zip(dims[:-1], dims[1:], strict=False)
        )
        data = torch.cat([torch.cat([r["data"][s][0] for r in per_rank]) for s in range(1)])
        reference = _fsdp_reference(dims, seed, per_rank, steps, lr)
        for rank, result in enumerate(per_rank):
            where = f"{what}: rank {rank}"
            if result["keeps_full"]:
                fail(
                    f"{where} keeps the whole layers it was given. Keep only this rank's shard of each; the "
                    "rest of the model lives on the other ranks."
                )
            _expect_own_storage(where, result["storages"])
            if result["bad_grads"]:
                fail(
                    f"{where}: after backward, the shards' gradients are {result['bad_grads'][0]}; "
                    "each shard should have a gradient of its own shape: its part of the averaged gradient."
                )
            for step, (volumes, counts, forward, peak) in enumerate(
                zip(
                    result["volumes"],
                    result["counts"],
                    result["forward_counts"],
                    result["peaks"],
                    strict=True,
                ),
                1,
            ):
                if world_size > 1:
                    _expect_fsdp_step(where, step, volumes, counts, forward, peak, numel, padded)
                    events, forward_end, layers_of = result["orders"][step - 1]
                    expect_prefetch(where, step, events, forward_end, len(dims) - 1, layers_of)
            _params_like(where, result["params"], reference)
            _compare(
                where,
                result["params"],
                reference,
                "one process's SGD on every rank's batch together",
                {
                    "sum the gradients over the ranks without dividing by the world size": _fsdp_reference(
                        dims, seed, per_rank, steps, lr * world_size
                    )
                }
                if world_size > 1
                else {},
            )
        del data


def _expect_own_storage(where: str, storages: list[tuple[int, int]]) -> None:
    """Each shard must own its memory: a view into the layer's padded flat buffer keeps the whole
    buffer alive, so the rank still holds the whole layer, whatever the shard's shape says."""
    __tracebackhide__ = True
    for i, (needs, keeps) in enumerate(storages):
        if keeps > needs:
            fail(
                f"{where}: model.shards[{i}] holds {needs} bytes but keeps alive a storage of {keeps} bytes: "
                "it is a slice of the layer's padded flat buffer, and a slice is a view that shares its "
                "tensor's storage, so every rank still holds the whole layer. Copy the shard into a tensor "
                "of its own (.clone()) before making it a Parameter."
            )


def _fsdp_reference(dims: Sequence[int], seed: int, per_rank: list, steps: int, lr: float) -> list:
    layers = make_layers(dims, seed)
    params = [p for layer in layers for p in layer.parameters()]
    for s in range(steps):
        x = torch.cat([r["data"][s][0] for r in per_rank])
        y = torch.cat([r["data"][s][1] for r in per_rank])
        for p in params:
            p.grad = None
        mse(_forward_alone(layers, x), y).backward()
        with torch.no_grad():
            for p in params:
                p -= lr * p.grad
    return [p.detach().clone() for p in params]


def _expect_fsdp_step(
    where: str, step: int, volumes: dict, counts: dict, forward: dict, peak: tuple, numel: int, padded: int
) -> None:
    __tracebackhide__ = True
    most, when, which = peak
    if most > 2:
        fail(
            f"{where}: during step {step}, the whole weights of {most} layers ({list(which)}) were alive at "
            f"once (after torch's {when}); at most two may be: the layer computing and the next one. "
            "Free a layer's gathered parameters once it has used them, in forward too: if autograd saves "
            "them for backward, they stay alive until then. Gather them again in backward."
        )
    gathered, scattered = volumes.get("all_gather", 0), volumes.get("reduce_scatter", 0)
    if forward.get("all_reduce") or (counts.get("all_reduce") and scattered >= numel):
        fail(
            f"{where}: step {step} issued {counts['all_reduce']} all_reduce(s)"
            f"{' in forward' if forward.get('all_reduce') else ''}, to gather the layers' weights (each "
            "rank's shard in a buffer of zeros, summed?). That sends twice the bytes of an all_gather, "
            "which gives every rank every shard: gather the weights with an all_gather."
        )
    if counts.get("all_reduce"):
        fail(
            f"{where}: step {step} issued {counts['all_reduce']} all_reduce(s) in backward. Each rank needs "
            "only its shard of the averaged gradients: reduce_scatter them."
        )
    if not 2 * numel <= gathered <= 2 * padded:
        fail(
            f"{where}: step {step}'s all_gathers carried {gathered} elements; the model has {numel} "
            f"parameters, and FSDP gathers each layer twice a step: once for forward, and again for "
            f"backward (having freed it after forward), {2 * numel} elements (a little more with padding)."
        )
    if not numel <= scattered <= padded:
        fail(
            f"{where}: step {step}'s reduce_scatters carried {scattered} elements; expected every gradient "
            f"once, {numel} elements (a little more with padding)."
        )
    total = gathered + scattered
    if total > 3 * padded:
        fail(f"{where}: step {step} moved {total} elements; FSDP moves 3 Ψ = {3 * numel}.")
