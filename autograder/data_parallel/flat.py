"""Notebook 04's check of gradients kept in one persistent flat buffer, as DDP's
``gradient_as_bucket_view`` keeps them: every ``.grad`` a view into it, one all_reduce of it per
step, and nothing allocated per step (measured on the tensors each operation returns)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..checks import counted, fail, fresh_seed, run_ranks
from ..comm import recording_waits
from .model import make_batch, make_mlp, mse
from .overlap import expect_average


class Allocations(TorchDispatchMode):
    """Notes each tensor of more than one element that an operation returns in memory none of
    its inputs had: what a step allocates (views, in-place operations and collectives do not)."""

    def __init__(self) -> None:
        super().__init__()
        self.made: list[tuple[str, int]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        given = {_storage(t) for t in _tensors((args, kwargs))}
        for t in _tensors(out):
            if t.numel() > 1 and _storage(t) not in given:
                self.made.append((f"{func.namespace}.{func.overloadpacket.__name__}", t.numel()))
        return out


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    return []


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _where(grad: Any) -> tuple | None:
    """Where a gradient lies: its memory, and its first element and element count in it."""
    if type(grad) is not torch.Tensor:
        return None
    return _storage(grad), grad.storage_offset(), grad.numel(), grad.is_contiguous()


def _batch(seed: int, step: int, rank: int, dtype: str) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = make_batch(4, seed=seed + 1 + 100 * step + rank)
    return x.to(getattr(torch, dtype)), y.to(getattr(torch, dtype))


def _flat_on_rank(
    rank: int, world_size: int, make_flat: Callable, dtype: str, steps: int, lr: float, seed: int
) -> list:
    model = make_mlp(seed=seed).to(getattr(torch, dtype))
    params = list(model.parameters())
    flat = make_flat(model)
    initial = [_where(p.grad) for p in params]
    out = []
    for step in range(steps):
        zeroing, reducing, events = Allocations(), Allocations(), []
        with zeroing:
            flat.zero_grad()
        x, y = _batch(seed, step, rank, dtype)
        mse(model(x), y).backward()
        after_backward = [_where(p.grad) for p in params]
        with recording_waits(events), reducing:
            flat.all_reduce()
        grads = [None if p.grad is None else p.grad.detach().clone() for p in params]
        issues = [(e[2], e[3], e[4]) for e in events if e[0] == "issue"]
        out.append((after_backward, issues, zeroing.made, reducing.made, grads))
        with torch.no_grad():
            for p in params:
                if p.grad is not None:
                    p -= lr * p.grad
    return initial, out


def _reference(world_size: int, dtype: str, steps: int, lr: float, seed: int) -> list[list[list]]:
    """Each rank's own gradients at each step of the training the ranks do, computed here."""
    model = make_mlp(seed=seed).to(getattr(torch, dtype))
    local = []
    for step in range(steps):
        per_rank = []
        for rank in range(world_size):
            model.zero_grad()
            mse(model(_batch(seed, step, rank, dtype)[0]), _batch(seed, step, rank, dtype)[1]).backward()
            per_rank.append([p.grad.clone() for p in model.parameters()])
        local.append(per_rank)
        with torch.no_grad():
            for i, p in enumerate(model.parameters()):
                p -= lr * (sum(g[i].double() for g in per_rank) / world_size).to(p.dtype)
    return local


def check_flat_gradients(
    make_flat: Callable,
    world_sizes: Sequence[int] = (2,),
    dtype: str = "float32",
    steps: int = 3,
    lr: float = 0.1,
) -> None:
    """Check ``flat = make_flat(model)``, then per step ``flat.zero_grad()``, backward,
    ``flat.all_reduce()``: every ``.grad`` a view into one buffer, the same at every step; one
    all_reduce, of that buffer, in the parameters' dtype; nothing allocated by ``zero_grad()`` or
    ``all_reduce()``; and the gradients then averaged over the ranks."""
    __tracebackhide__ = True
    seed = fresh_seed()
    params = list(make_mlp().parameters())
    total = sum(p.numel() for p in params)
    for world_size in world_sizes:
        name = getattr(make_flat, "__name__", "the flat gradients")
        what = f"{name} on {counted(world_size, 'rank')}, a {dtype} model"
        per_rank = run_ranks(_flat_on_rank, world_size, make_flat, dtype, steps, lr, seed, what=name)
        local = _reference(world_size, dtype, steps, lr, seed)
        for rank, (initial, results) in enumerate(per_rank):
            _expect_views(f"{what}, rank {rank}: after {name}(model)", initial, None)
            for step, (after_backward, issues, zeroing, reducing, grads) in enumerate(results):
                where = f"{what}, step {step + 1}, rank {rank}"
                buffer = initial[0][0]
                _expect_views(f"{where}: after backward", after_backward, buffer)
                _expect_one_all_reduce(where, issues, buffer, total, getattr(torch, dtype))
                for method, made in (("zero_grad()", zeroing), ("all_reduce()", reducing)):
                    if made:
                        op, numel = made[0]
                        fail(
                            f"{where}: {method} allocated a tensor of {numel} elements ({op}). The buffer "
                            "is made once, when the object is: a step allocates nothing, and zeroes and "
                            "reduces the buffer in place."
                        )
                expect_average(where, grads, local[step], rank, after="all_reduce()")


def _expect_views(what: str, where: list, buffer: int | None) -> None:
    """Every gradient a contiguous view into one memory (``buffer``'s, if given), none overlapping."""
    __tracebackhide__ = True
    spans = []
    for i, place in enumerate(where):
        if buffer is None:  # just made: all in parameter 0's .grad's memory
            if place is None or place[0] != where[0][0] or not place[3]:
                fail(
                    f"{what}, parameter {i}'s .grad is "
                    + ("None" if place is None else "not in the memory of parameter 0's")
                    + ". Make one buffer for all the gradients there, and every parameter's .grad a "
                    "contiguous slice of it, viewed in the parameter's shape."
                )
        elif place is None or place[0] != buffer:
            fail(
                f"{what}, parameter {i}'s .grad no longer lies in the buffer. Setting .grad to None, as "
                "model.zero_grad() does by default, or to a new tensor makes backward allocate a new one: "
                "zero the buffer in place instead, and keep the views."
            )
        spans.append((place[1], place[1] + place[2]))
    spans.sort()
    if any(end > start for (_, end), (start, _) in zip(spans, spans[1:], strict=False)):
        fail(f"{what}, two parameters' .grad views overlap in the buffer; give each its own elements.")


def _expect_one_all_reduce(
    what: str, issues: list, buffer: int | None, total: int, dtype: torch.dtype
) -> None:
    __tracebackhide__ = True
    if len(issues) != 1:
        fail(
            f"{what}: all_reduce() issued {counted(len(issues), 'all_reduce')} of "
            f"{[n for n, _, _ in issues]} elements; expected one, of the whole buffer of {total}."
        )
    numel, carried, storage = issues[0]
    if storage != buffer or numel != total:
        fail(
            f"{what}: the all_reduce was of {numel} elements that are not the gradients' buffer (a copy "
            "of it?). Reduce the buffer itself, in place: the .grad views then hold the result."
        )
    if carried != dtype:
        fail(f"{what}: the all_reduce carried {carried}; the gradients are {dtype}.")
