"""Checks for notebook 07 (sharded data parallelism: ZeRO and FSDP).

The ranks' gradients and batches are drawn inside each rank from a seed no other process knows,
and returned with the results, so that the reference (plain AdamW or SGD in one process) is
computed here, in the checking process, from what the ranks really had. What each rank did is
measured as it happens: the collectives it issued and how many elements they carried (`CommLog`),
the bytes its optimizer keeps from one step to the next (every storage made during the
optimizer's construction and steps that is still alive afterwards), and, for FSDP, which layers'
whole weights were alive in the rank's memory after each tensor operation.
"""

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
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode

import launcher

from .checks import (
    allclose,
    counted,
    expect_close,
    expect_equal,
    fail,
    fresh_seed,
    private_generator,
    run_ranks,
)
from .comm import CommLog
from .data_parallel import make_batch, make_mlp, mse, train_alone

launcher.preload("autograder.sharded_data_parallel", "torch.distributed.fsdp")

__all__ = ["make_batch", "make_layers", "make_mlp", "mse"]

_type = type

GRADIENT_SCALE = 0.01  # the checks' gradients are N(0, 0.01^2): with eps=0.01, Adam sees a missing 1/n


# -- what a rank keeps: storages made while watching that are still alive ---------------------


class _Storages(TorchDispatchMode):
    """Notes the storage of every tensor an operation returns while it is active; `alive_bytes`
    then says how many bytes of those storages are still alive (a tensor that shares a storage,
    a ``Parameter`` wrapped around one, keeps it alive too)."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[StorageWeakRef, int, int]] = []
        self.foreign: set[int] = set()  # storages the caller made (parameters, gradients): not counted

    def hand_over(self, tensors: Sequence[torch.Tensor | None]) -> None:
        """These tensors are the caller's: views of them are not the rank's own state."""
        self.foreign = {t.untyped_storage()._cdata for t in tensors if t is not None}

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in _tensors(out):
            if t.device.type != "meta" and t.untyped_storage()._cdata not in self.foreign:
                storage = t.untyped_storage()
                self.refs.append((StorageWeakRef(storage), storage.data_ptr(), storage.nbytes()))
        return out

    def alive_bytes(self, excluded: Sequence[torch.Tensor]) -> int:
        # Gloo's worker thread may still hold the last collective's tensors for a moment after the
        # collective returned: the least of a few readings, a little apart, is what the rank keeps.
        readings = []
        for _ in range(3):
            gc.collect()
            readings.append(self._alive_bytes_now(excluded))
            time.sleep(0.01)
        return min(readings)

    def _alive_bytes_now(self, excluded: Sequence[torch.Tensor]) -> int:
        skip = {t.untyped_storage().data_ptr() for t in excluded if t is not None}
        alive: dict[int, int] = {}
        for ref, pointer, nbytes in self.refs:
            if not ref.expired() and pointer not in skip and nbytes:
                alive[pointer] = max(alive.get(pointer, 0), nbytes)
        return sum(alive.values())


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors(item)]
    return []


def _volumes(summary: dict) -> dict[str, int]:
    """Elements each kind of collective carried, counted as whole arrays: an all_gather's output
    (its piece times the world size), a reduce_scatter's input, an all_reduce's tensor."""
    world_size = dist.get_world_size()
    volumes: dict[str, int] = {}
    for (name, numels), (_, contributed) in zip(summary["calls"], summary["contributed"], strict=True):
        size = contributed * world_size if name == "all_gather" else contributed or sum(numels)
        volumes[name] = volumes.get(name, 0) + size
    return volumes


def _counts(summary: dict) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name, _ in summary["calls"]:
        counts[name] = counts.get(name, 0) + 1
    return counts


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (
        _type(a) is torch.Tensor
        and a.shape == b.shape
        and allclose(a.float(), b.float(), rtol=1e-4, atol=1e-6)
    )


def _params_like(what: str, params: Any, reference: list[torch.Tensor]) -> None:
    __tracebackhide__ = True
    if _type(params) is not list or len(params) != len(reference):
        fail(f"{what}: returned {params!r:.100}; expected a list of {len(reference)} tensors.")
    for i, (p, r) in enumerate(zip(params, reference, strict=True)):
        if _type(p) is not torch.Tensor or p.shape != r.shape:
            fail(f"{what}: parameter {i} is {p!r:.80}; expected a tensor of shape {tuple(r.shape)}.")


def _compare(what: str, params: list, reference: list, against: str, mistakes: dict[str, list]) -> None:
    __tracebackhide__ = True
    wrong = [i for i, (p, r) in enumerate(zip(params, reference, strict=True)) if not _close(p, r)]
    if not wrong:
        return
    i = wrong[0]
    message = (
        f"{what}: parameter {i} differs from {against} (largest difference "
        f"{(params[i].float() - reference[i]).abs().max().item():.3g})."
    )
    for mistake, alternative in mistakes.items():
        if all(_close(p, a) for p, a in zip(params, alternative, strict=True)):
            message += f" That is what you get if you {mistake}."
            break
    fail(message)


# -- exercise: memory per device ----------------------------------------------------------------


def zero_memory_reference(psi: float, n: int, stage: int) -> float:
    """Bytes per device of mixed-precision Adam's parameters, gradients and optimizer state (for
    the checks; never shown to students)."""
    params, grads, optimizer = 2.0 * psi, 2.0 * psi, 12.0 * psi
    return (
        params / (n if stage >= 3 else 1)
        + grads / (n if stage >= 2 else 1)
        + optimizer / (n if stage >= 1 else 1)
    )


def check_zero_memory(zero_memory: Callable, cases: Sequence[tuple[float, int, int]]) -> None:
    """Check ``zero_memory(psi, n, stage)`` on each case, naming the typical mistakes, and that a
    stage other than 0-3, or fewer than one device, is refused with a ValueError."""
    __tracebackhide__ = True
    for psi, n, stage in cases:
        what = f"zero_memory(psi={psi:g}, n={n}, stage={stage})"
        mistakes = {
            "count 16 bytes of optimizer state per parameter (K=16) instead of 12": (
                2 * psi / (n if stage >= 3 else 1)
                + 2 * psi / (n if stage >= 2 else 1)
                + 16 * psi / (n if stage >= 1 else 1)
            ),
            "shard the 16-bit parameters already in stage 1 (stage 1 shards only the optimizer state)": (
                2 * psi / n + 2 * psi / (n if stage >= 2 else 1) + 12 * psi / n
            ),
            "shard the gradients already in stage 1 (that is stage 2)": zero_memory_reference(
                psi, n, stage + 1
            ),
            "count the stages one too late (stage 1 sharding nothing)": zero_memory_reference(
                psi, n, stage - 1
            ),
            "forget the fp32 master copy of the parameters (8 bytes of Adam state, not 12)": (
                2 * psi / (n if stage >= 3 else 1)
                + 2 * psi / (n if stage >= 2 else 1)
                + 8 * psi / (n if stage >= 1 else 1)
            ),
        }
        if stage != 1:  # a mistake of stage 1's only
            del mistakes[
                "shard the 16-bit parameters already in stage 1 (stage 1 shards only the optimizer state)"
            ]
        expect_close(
            zero_memory(psi, n, stage),
            zero_memory_reference(psi, n, stage),
            what,
            rel=1e-6,
            mistakes=mistakes,
        )
    for bad in ((1e9, 8, 4), (1e9, 8, -1), (1e9, 0, 1)):
        try:
            zero_memory(*bad)
        except ValueError:
            continue
        except Exception as err:  # noqa: BLE001 - any other error is the wrong kind
            fail(f"zero_memory{bad} raised {type(err).__name__}: {err}; expected a ValueError that says why.")
        fail(
            f"zero_memory{bad} returned without complaint; expected a ValueError "
            "(no such stage, or no devices)."
        )


# -- exercise: the pieces of a flat shard -----------------------------------------------------------


def check_shard_pieces(shard_pieces: Callable, cases: Sequence[tuple[Sequence[int], int]]) -> None:
    """Check ``shard_pieces(numels, world_size, rank)`` for every rank of each case, exactly, and
    that a rank outside the world is refused with a ValueError."""
    __tracebackhide__ = True
    for numels, world_size in cases:
        total = sum(numels)
        for rank in range(world_size):
            what = f"shard_pieces({list(numels)}, world_size={world_size}, rank={rank})"
            expected = flat_pieces_reference(numels, world_size, rank)
            mistakes = {
                "round the shard size down (the last elements then belong to no rank)": _pieces_with_shard(
                    numels, world_size, rank, total // world_size
                ),
                "give the pieces' offsets in the whole flat buffer, not in the parameter and the shard": [
                    expected[0],
                    [(i, a + sum(numels[:i]), b + rank * expected[0], n) for i, a, b, n in expected[1]],
                ],
                "pad each parameter on its own": _pieces_padded_each(numels, world_size, rank),
            }
            expect_equal(
                _plain(shard_pieces(list(numels), world_size, rank)), list(expected), what, mistakes=mistakes
            )
    numels, world_size = cases[0]
    for rank in (world_size, -1):
        try:
            shard_pieces(list(numels), world_size, rank)
        except ValueError:
            continue
        except Exception as err:  # noqa: BLE001 - any other error is the wrong kind
            fail(
                f"shard_pieces(..., world_size={world_size}, rank={rank}) raised "
                f"{type(err).__name__}; expected a ValueError."
            )
        fail(
            f"shard_pieces(..., world_size={world_size}, rank={rank}) returned; "
            "expected a ValueError (no such rank)."
        )


def _plain(answer: Any) -> Any:
    """The answer as lists (a tuple of tuples is as good as a list of lists)."""
    if isinstance(answer, tuple) and len(answer) == 2:
        answer = list(answer)
    if isinstance(answer, list) and len(answer) == 2 and isinstance(answer[1], (list, tuple)):
        return [answer[0], [list(p) if isinstance(p, tuple) else p for p in answer[1]]]
    return answer


def _pieces_with_shard(numels: Sequence[int], world_size: int, rank: int, shard: int) -> list:
    pieces, start = [], 0
    low, high = rank * shard, (rank + 1) * shard
    for i, n in enumerate(numels):
        a, b = max(start, low), min(start + n, high)
        if a < b:
            pieces.append([i, a - start, a - low, b - a])
        start += n
    return [shard, pieces]


def _pieces_padded_each(numels: Sequence[int], world_size: int, rank: int) -> list:
    pieces, offset = [], 0
    for i, n in enumerate(numels):
        size = -(-n // world_size)
        a, b = rank * size, min((rank + 1) * size, n)
        if a < b:
            pieces.append([i, a, offset, b - a])
        offset += size
    return [offset, pieces]


def flat_pieces_reference(numels: Sequence[int], world_size: int, rank: int) -> tuple[int, list]:
    """The answer to the flat-shard exercise, for the checks (never shown to students)."""
    shard = -(-sum(numels) // world_size)
    pieces, start = [], 0
    low, high = rank * shard, (rank + 1) * shard
    for i, n in enumerate(numels):
        a, b = max(start, low), min(start + n, high)
        if a < b:
            pieces.append([i, a - start, a - low, b - a])
        start += n
    return shard, pieces


# -- exercises: ZeRO-1 and ZeRO-2 optimizers ---------------------------------------------------------


def _initial_params(shapes: Sequence[tuple[int, ...]], seed: int) -> list[nn.Parameter]:
    generator = torch.Generator().manual_seed(seed)
    return [nn.Parameter(torch.randn(shape, generator=generator)) for shape in shapes]


def _zero_on_rank(
    rank: int,
    world_size: int,
    make_optimizer: Callable,
    shapes: list,
    steps: int,
    hyper: dict,
    seed: int,
    averaged: bool,
) -> dict:
    params = _initial_params(shapes, seed)  # the same on every rank, as after DDP's broadcast
    generator = private_generator()  # this rank's gradients: no other rank can know them
    storages = _Storages()
    drawn, volumes, counts, kept_grads = [], [], [], []
    storages.hand_over(params)
    with storages:
        optimizer = make_optimizer(params, **hyper)
    for _ in range(steps):
        local = [GRADIENT_SCALE * torch.randn(p.shape, generator=generator) for p in params]
        drawn.append(local)
        for p, g in zip(params, local, strict=True):
            p.grad = g.clone()
            if averaged:  # what DDP did before the optimizer's step: every rank has the average
                dist.all_reduce(p.grad)
                p.grad /= world_size
        storages.hand_over([*params, *(p.grad for p in params)])
        with CommLog(count_collectives=False) as log, storages:
            optimizer.step()
        summary = log.summary()
        volumes.append(_volumes(summary))
        counts.append(_counts(summary))
        kept_grads.append([p.grad is not None for p in params])
        for p in params:
            p.grad = None
    kept = storages.alive_bytes(list(params))
    return {
        "params": [p.detach().clone() for p in params],
        "grads": drawn,
        "volumes": volumes,
        "counts": counts,
        "kept_bytes": kept,
        "kept_grads": kept_grads,
    }


def _adamw_reference(
    shapes: Sequence[tuple[int, ...]], seed: int, grads_per_step: list[list[torch.Tensor]], hyper: dict
) -> list[torch.Tensor]:
    params = _initial_params(shapes, seed)
    optimizer = torch.optim.AdamW(params, foreach=False, **hyper)
    for grads in grads_per_step:
        for p, g in zip(params, grads, strict=True):
            p.grad = g.clone()
        optimizer.step()
    return [p.detach().clone() for p in params]


def check_zero_optimizer(
    make_optimizer: Callable,
    stage: int,
    world_sizes: Sequence[int] = (2,),
    shapes: Sequence[tuple[int, ...]] = ((33, 17), (17,), (9, 33), (9,)),
    steps: int = 3,
    lr: float = 0.1,
    weight_decay: float = 0.1,
    eps: float = 0.01,
) -> None:
    """Check a ZeRO optimizer, ``make_optimizer(params, lr=, eps=, weight_decay=)`` with a
    ``step()``: after ``steps`` steps every rank's parameters equal plain AdamW's on the average of
    the ranks' gradients; each rank keeps about 1/n of the state; stage 1 receives gradients
    already averaged, stage 2 each rank's own and reduce_scatters them."""
    __tracebackhide__ = True
    name = getattr(make_optimizer, "__name__", "the optimizer")
    hyper = {"lr": lr, "eps": eps, "weight_decay": weight_decay}
    numel = sum(math.prod(s) for s in shapes)
    seed = fresh_seed() % (1 << 31)
    for world_size in world_sizes:
        what = f"{name} on {counted(world_size, 'rank')}, {numel} parameters in {len(shapes)} tensors"
        per_rank = run_ranks(
            _zero_on_rank, world_size, make_optimizer, list(shapes), steps, hyper, seed, stage == 1, what=name
        )
        average = [
            [sum(r["grads"][s][i] for r in per_rank) / world_size for i in range(len(shapes))]
            for s in range(steps)
        ]
        reference = _adamw_reference(shapes, seed, average, hyper)
        summed = _adamw_reference(shapes, seed, [[g * world_size for g in step] for step in average], hyper)
        share = -(-numel // world_size)
        allowed = (12 if stage == 1 else 16) * share + 256
        for rank, result in enumerate(per_rank):
            where = f"{what}: rank {rank}"
            _params_like(where, result["params"], reference)
            if result["kept_bytes"] > allowed:
                full = 8 * numel
                hint = (
                    " That is about Adam's two moments for every parameter: does every rank update every "
                    "parameter? Each should keep state, and update, for its own shard only."
                    if result["kept_bytes"] >= full
                    else ""
                )
                fail(
                    f"{where} keeps {result['kept_bytes']} bytes of its own between steps; "
                    f"its 1/{world_size} share is {share} elements, so it may keep at most {allowed} bytes "
                    f"({12 if stage == 1 else 16} bytes per element of its shard, and 256 more).{hint}"
                )
            if stage == 2 and any(any(kept) for kept in result["kept_grads"]):
                fail(
                    f"{where}: after step() some parameters still hold a .grad. In stage 2 a rank keeps only "
                    "its shard of the reduced gradients: set every p.grad to None once they are reduced."
                )
            mistakes = {}
            if stage == 2 and world_size > 1:
                mistakes["sum the gradients over the ranks without dividing by the world size"] = summed
            if not all(_close(p, r) for p, r in zip(result["params"], reference, strict=True)):
                gathered = sum(v.get("all_gather", 0) for v in result["volumes"])
                if world_size > 1 and not gathered:
                    fail(
                        f"{where}: its parameters differ from plain AdamW's, and it never all_gathered: each "
                        "rank updated only its own shard, so the other ranks' updates never reached it. "
                        "After the update, all_gather the updated shards into every rank's parameters."
                    )
                _compare(
                    where, result["params"], reference, "plain AdamW on the averaged gradients", mistakes
                )
            for step, (volumes, counts) in enumerate(
                zip(result["volumes"], result["counts"], strict=True), 1
            ):
                _expect_zero_communication(
                    where, step, stage, volumes, counts, numel, len(shapes), world_size
                )


def _expect_zero_communication(
    where: str, step: int, stage: int, volumes: dict, counts: dict, numel: int, tensors: int, world_size: int
) -> None:
    __tracebackhide__ = True
    if world_size == 1:
        return
    slack = world_size * tensors  # padding, if each tensor is padded on its own
    gathered = volumes.get("all_gather", 0)
    if stage == 1 and counts.get("all_reduce"):
        fail(
            f"{where}: step {step} issued {counts['all_reduce']} all_reduce(s). In stage 1 the gradients "
            "arrive averaged already; the step needs only to share the updated shards."
        )
    if stage == 2:
        if counts.get("all_reduce"):
            fail(
                f"{where}: step {step} issued {counts['all_reduce']} all_reduce(s) of "
                f"{volumes['all_reduce']} elements. Each rank needs only its own shard of the summed "
                "gradients: a reduce_scatter gives it that, at half an all_reduce's cost. (An all_reduce "
                "then a slice sends twice the bytes and keeps a whole gradient on every rank.)"
            )
        scattered = volumes.get("reduce_scatter", 0)
        if not numel <= scattered <= numel + slack:
            fail(
                f"{where}: step {step}'s reduce_scatters carried {scattered} elements; expected the "
                f"{numel} gradients once (with a little padding)."
            )
    if not numel <= gathered <= numel + slack:
        fail(
            f"{where}: step {step}'s all_gathers carried {gathered} elements; expected the {numel} "
            "updated parameters once (with a little padding): every rank needs every updated shard."
        )
    others = {k: v for k, v in counts.items() if k not in ("all_gather", "reduce_scatter", "all_reduce")}
    if others:
        fail(f"{where}: step {step} also issued {others}; the step needs none of them.")


# -- exercise: an FSDP MLP -----------------------------------------------------------------------


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
        self.set_weights(weights)

    def set_weights(self, weights: list[torch.Tensor]) -> None:
        samples = []
        for w in weights:
            flat = w.detach().reshape(-1)
            samples.append(flat[torch.linspace(0, flat.numel() - 1, _SAMPLES).round().long()])
        self.samples = torch.cat(samples).float()
        self.smallest = min(w.numel() for w in weights)

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        made = [t for t in _tensors(out) if t.is_floating_point()]
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
        alive = [t for t in (ref() for ref in self.tracked) if t is not None]
        self.tracked = [weakref.ref(t) for t in alive]
        whole: set[int] = set()
        for t in alive:
            found = torch.isin(self.samples, t.detach().reshape(-1).float()).view(-1, _SAMPLES).all(dim=1)
            whole |= set(found.nonzero().flatten().tolist())
        if len(whole) > self.peak:
            self.peak, self.when, self.layers_at_peak = len(whole), after, tuple(sorted(whole))


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
    generator = private_generator()
    data, volumes, counts, peaks, unsharded = [], [], [], [], []
    for _ in range(steps):
        x, y = (
            torch.randn(rows, dims[0], generator=generator),
            torch.randn(rows, dims[-1], generator=generator),
        )
        data.append((x, y))
        with CommLog(count_collectives=False) as log, alive:
            loss = mse(model(x), y)
            loss.backward()
            alive.look("backward")
        summary = log.summary()
        volumes.append(_volumes(summary))
        counts.append(_counts(summary))
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
        "peaks": peaks,
        "keeps_full": keeps_full,
        "bad_grads": unsharded,
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
    weights of at most two layers at once, and each step moves 3 Ψ (all_gather in forward and in
    backward, reduce_scatter of the gradients)."""
    __tracebackhide__ = True
    name = getattr(make_model, "__name__", "the model")
    seed = fresh_seed() % (1 << 31)
    numel = sum(a * b + b for a, b in zip(dims[:-1], dims[1:], strict=False))
    num_layers = len(dims) - 1
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
            if result["bad_grads"]:
                fail(
                    f"{where}: after backward, the shards' gradients are {result['bad_grads'][0]}; "
                    "each shard should have a gradient of its own shape: its part of the averaged gradient."
                )
            for step, (volumes, counts, peak) in enumerate(
                zip(result["volumes"], result["counts"], result["peaks"], strict=True), 1
            ):
                if world_size > 1:
                    _expect_fsdp_step(where, step, volumes, counts, peak, numel, padded, num_layers)
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
    where: str, step: int, volumes: dict, counts: dict, peak: tuple, numel: int, padded: int, layers: int
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
    if counts.get("all_reduce"):
        fail(
            f"{where}: step {step} issued {counts['all_reduce']} all_reduce(s). Each rank needs only its "
            "shard of the averaged gradients: reduce_scatter them."
        )
    gathered, scattered = volumes.get("all_gather", 0), volumes.get("reduce_scatter", 0)
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


# -- exercise: torch's fully_shard ----------------------------------------------------------------


# Gloo before torch 2.13 (measured with 2.8): its reduce_scatter sums where it is asked for
# ReduceOp.AVG, and it has no allgather_into_tensor_coalesced, which DTensor.full_tensor needs.
# 2.13 does both. (What is done about it below is right on any version.)
OLD_GLOO = torch.torch_version.TorchVersion(torch.__version__) < "2.13"


def fully_shard(module: nn.Module, **kwargs: Any) -> nn.Module:
    """``torch.distributed.fsdp.fully_shard(module, **kwargs)``, which on Gloo before torch 2.13
    would sum the gradients it must average (FSDP2 asks the reduce_scatter for ReduceOp.AVG):
    there, the reduce_scatter sums and FSDP divides afterwards."""
    from torch.distributed.fsdp import fully_shard as torch_fully_shard

    sharded = torch_fully_shard(module, **kwargs)
    if OLD_GLOO and dist.get_backend() == "gloo":
        sharded.set_force_sum_reduction_for_comms(True)
    return sharded


def full_tensor(param: torch.Tensor) -> torch.Tensor:
    """The whole of a parameter that ``fully_shard`` cut into rows (a ``DTensor``), on every
    rank: ``param.full_tensor()``, or on Gloo before torch 2.13, which cannot run that, the
    same gathered by `gather_rows`."""
    from torch.distributed.tensor import DTensor, Shard

    if _type(param) is not DTensor:
        return param
    if not (OLD_GLOO and param.device.type == "cpu") or tuple(param.placements) != (Shard(0),):
        return param.full_tensor()
    return gather_rows(param)


def gather_rows(param: torch.Tensor) -> torch.Tensor:
    """A ``DTensor`` sharded by rows, made whole on every rank with the list form of all_gather,
    each rank's rows padded to ``torch.chunk``'s size (the last ranks may hold fewer, or none)."""
    group = param.device_mesh.get_group()
    world_size = dist.get_world_size(group)
    rows = param.shape[0]
    local = param.to_local().detach()
    padded = local.new_zeros((math.ceil(rows / world_size), *local.shape[1:]))
    padded[: local.shape[0]] = local
    pieces = [torch.empty_like(padded) for _ in range(world_size)]
    dist.all_gather(pieces, padded, group=group)
    return torch.cat(pieces)[:rows]


def _fully_shard_on_rank(
    rank: int, world_size: int, train: Callable, batch: int, steps: int, lr: float, seed: int
) -> tuple:
    made: list[int] = []

    def make_model() -> nn.Module:
        made.append(1)
        return make_mlp(seed=seed + 1 + rank)  # each rank's own, as on separate GPUs

    data, targets = make_batch(batch, seed=seed)
    with CommLog(count_collectives=False) as log:
        params = train(rank, world_size, make_model, data, targets, steps, lr)
    summary = log.summary()
    if _type(params) is list:
        params = [p if _type(p) is torch.Tensor else None for p in params]
    largest = {}  # the most elements one collective of each kind carried, as a whole array
    for (name, _), (_, contributed) in zip(summary["calls"], summary["contributed"], strict=True):
        size = contributed * world_size if name == "all_gather" else contributed
        largest[name] = max(largest.get(name, 0), size)
    return params, largest, len(made)


def check_fully_shard(
    train: Callable, world_sizes: Sequence[int] = (2,), batch: int = 8, steps: int = 2, lr: float = 0.1
) -> None:
    """Check ``train(rank, world_size, make_model, data, targets, steps, lr)`` with torch's
    ``fully_shard``: every rank returns the full parameters one process reaches with SGD on the
    whole batch from rank 0's model, each layer its own unit of sharding."""
    __tracebackhide__ = True
    name = getattr(train, "__name__", "train")
    seed = fresh_seed() % (1 << 31)
    data, targets = make_batch(batch, seed=seed)
    reference = train_alone(make_mlp(seed=seed + 1), data, targets, steps, lr)
    layer = max(m.weight.numel() + m.bias.numel() for m in make_mlp() if isinstance(m, nn.Linear))
    for world_size in world_sizes:
        what = f"{name} on {counted(world_size, 'rank')}, a batch of {batch}, {steps} steps"
        per_rank = run_ranks(_fully_shard_on_rank, world_size, train, batch, steps, lr, seed, what=name)
        for rank, (params, largest, made) in enumerate(per_rank):
            where = f"{what}: rank {rank}"
            if made != 1:
                fail(f"{where} called make_model() {made} times; call it once, for this rank's model.")
            _params_like(where, params, reference)
            biggest = max(largest.get("all_gather", 0), largest.get("reduce_scatter", 0))
            if world_size > 1 and biggest > 2 * layer:
                fail(
                    f"{where}: one of its collectives carried {biggest} elements, more than the model's "
                    f"largest layer ({layer} parameters): its unit of sharding is larger than a layer, "
                    "and the whole unit is gathered at once. Apply fully_shard to each linear layer, then "
                    "to the whole model."
                )
            if world_size > 1 and not largest.get("reduce_scatter"):
                fail(f"{where}: no reduce_scatter was issued: is the model sharded with fully_shard?")
            mixed = {}
            if world_size > 1:
                start = _mixed_model(seed, world_size)
                unsynced = train_alone(start, data, targets, steps, lr)
                mixed[
                    "leave each rank's model as it was made: fully_shard cuts each rank's shard from its own "
                    "model, so the model is a patchwork of the ranks' (broadcast rank 0's parameters first)"
                ] = unsynced
            if world_size > 1 and OLD_GLOO:
                summed = train_alone(make_mlp(seed=seed + 1), data, targets, steps, lr * world_size)
                mixed[
                    "shard with torch's own fully_shard on this torch: before 2.13, Gloo's reduce_scatter "
                    "sums the gradients FSDP asks it to average. Use the fully_shard imported at the top"
                ] = summed
            _compare(
                where, params, reference, "one process's SGD on the whole batch from rank 0's model", mixed
            )
        if world_size > 1 and not all(
            all(_close(p, q) for p, q in zip(r[0], per_rank[0][0], strict=True)) for r in per_rank
        ):
            fail(f"{what}: the ranks returned different parameters; each should return the full parameters.")


def _mixed_model(seed: int, world_size: int) -> nn.Module:
    """The model fully_shard makes from ranks that each made their own: each parameter's rows
    split as torch.chunk splits them, rank r's chunk from rank r's model."""
    models = [make_mlp(seed=seed + 1 + r) for r in range(world_size)]
    mixed = make_mlp(seed=seed + 1)
    with torch.no_grad():
        for name, p in mixed.named_parameters():
            chunks = [
                dict(m.named_parameters())[name].chunk(world_size)[r]
                for r, m in enumerate(models)
                if r < len(p.chunk(world_size))
            ]
            p.copy_(torch.cat(chunks))
    return mixed
