"""Checks for notebook 04 (data parallelism), and the model its exercises train.

Every check trains or differentiates the same small MLP on every rank and compares with one
process training on the whole batch, computed here, in the checking process. The ranks' data
and initial parameters are drawn from a seed each check picks afresh at random, so that no rank
can know another's without communicating. What each rank did is recorded as it happens (the
rows its model saw, the collectives it issued and when, the handles it waited on), so a right
result reached the wrong way fails too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

import launcher

from .checks import MATMUL_OPS, Timeline, allclose, counted, fail, fresh_seed, run_ranks, tensors_equal
from .comm import CommLog, recording_waits

launcher.preload("autograder.data_parallel")

NUM_DIM = 16
_type = type


def make_mlp(num_dim: int = NUM_DIM, num_layers: int = 4, seed: int = 0) -> nn.Sequential:
    """The lecture's deep MLP, small enough for a CPU: ``num_layers`` square linear layers with
    a GELU between each, its parameters drawn from ``seed``."""
    layers: list[nn.Module] = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for i in range(num_layers):
            layers.append(nn.Linear(num_dim, num_dim))
            if i < num_layers - 1:
                layers.append(nn.GELU())
    return nn.Sequential(*layers)


def make_batch(batch: int, seed: int, num_dim: int = NUM_DIM) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets of ``batch`` rows, drawn from ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, num_dim, generator=generator), torch.randn(batch, num_dim, generator=generator)


def mse(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The mean squared error over every element."""
    return ((outputs - targets) ** 2).mean()


def train_alone(model: nn.Module, data: torch.Tensor, targets: torch.Tensor, steps: int, lr: float) -> list:
    """One process, the whole batch, plain SGD: what data parallelism must reproduce."""
    for _ in range(steps):
        model.zero_grad()
        mse(model(data), targets).backward()
        with torch.no_grad():
            for p in model.parameters():
                if p.grad is not None:
                    p -= lr * p.grad
    return [p.detach().clone() for p in model.parameters()]


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and allclose(a, b, rtol=1e-4, atol=1e-6)


def _params_like(what: str, params: Any, reference: list[torch.Tensor]) -> None:
    __tracebackhide__ = True
    if _type(params) is not list or len(params) != len(reference):
        fail(
            f"{what} returned {params!r:.100}; expected a list of {len(reference)} tensors, the model's "
            "parameters."
        )
    for i, (p, r) in enumerate(zip(params, reference, strict=True)):
        if _type(p) is not torch.Tensor or p.shape != r.shape:
            fail(f"{what}: parameter {i} is {p!r:.80}; expected a tensor of shape {tuple(r.shape)}.")


def _compare(what: str, params: list, reference: list, mistakes: dict[str, list]) -> None:
    __tracebackhide__ = True
    wrong = [i for i, (p, r) in enumerate(zip(params, reference, strict=True)) if not _close(p, r)]
    if not wrong:
        return
    i = wrong[0]
    message = (
        f"{what}: parameter {i} differs from one process's training on the whole batch (largest "
        f"difference {(params[i] - reference[i]).abs().max().item():.3g})."
    )
    for mistake, alternative in mistakes.items():
        if all(_close(p, a) for p, a in zip(params, alternative, strict=True)):
            message += f" That is what you get if you {mistake}."
            break
    fail(message)


# -- exercise: data parallelism by hand, and with torch's DistributedDataParallel ----------------


def _train_on_rank(
    rank: int, world_size: int, train: Callable, batch: int, steps: int, lr: float, seed: int
) -> tuple:
    rows: list[int] = []
    made: list[int] = []
    constructed = _count_ddp_models()

    def make_model() -> nn.Module:
        made.append(1)
        model = make_mlp(seed=seed + 1 + rank)  # each rank's own, as on separate GPUs
        model.register_forward_pre_hook(lambda module, inputs: rows.append(inputs[0].shape[0]))
        return model

    data, targets = make_batch(batch, seed=seed)
    with constructed as ddp_models:
        params = train(rank, world_size, make_model, data, targets, steps, lr)
    return params, rows, len(made), len(ddp_models)


@contextlib.contextmanager
def _count_ddp_models() -> Iterator[list[int]]:
    """Counts the DistributedDataParallel models constructed inside it."""
    cls = torch.nn.parallel.DistributedDataParallel
    real = cls.__init__
    made: list[int] = []

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        made.append(1)
        real(self, *args, **kwargs)

    cls.__init__ = init
    try:
        yield made
    finally:
        cls.__init__ = real


def check_data_parallel(
    train: Callable,
    world_sizes: Sequence[int] = (2,),
    batch: int = 8,
    steps: int = 3,
    lr: float = 0.1,
    with_torch_ddp: bool = False,
) -> None:
    """Check ``train(rank, world_size, make_model, data, targets, steps, lr)``: every rank ends with
    the parameters one process reaches training the whole batch with SGD, from rank 0's initial
    parameters, each rank having fed its model its own shard of the batch."""
    __tracebackhide__ = True
    name = getattr(train, "__name__", "train")
    seed = fresh_seed()
    data, targets = make_batch(batch, seed=seed)
    reference = train_alone(make_mlp(seed=seed + 1), data, targets, steps, lr)
    for world_size in world_sizes:
        what = f"{name} on {counted(world_size, 'rank')}, a batch of {batch}, {steps} steps"
        per_rank = run_ranks(_train_on_rank, world_size, train, batch, steps, lr, seed, what=name)
        shards = [len(s) for s in torch.arange(batch).tensor_split(world_size)]
        for rank, (params, rows, made, ddp_models) in enumerate(per_rank):
            if made != 1:
                fail(
                    f"{what}: rank {rank} called make_model() {made} times; call it once, for this rank's "
                    "model."
                )
            if with_torch_ddp and ddp_models != 1:
                fail(
                    f"{what}: rank {rank} made {ddp_models} DistributedDataParallel models; wrap its model "
                    "in one."
                )
            if not rows or any(r != shards[rank] for r in rows):
                fail(
                    f"{what}: rank {rank}'s model was fed batches of {sorted(set(rows))} rows; its shard of "
                    f"the batch has {shards[rank]}. Each rank computes on its own slice of the batch only."
                )
            _params_like(f"{what}: rank {rank}", params, reference)
        for rank, (params, *_) in enumerate(per_rank[1:], start=1):
            if not all(_close(p, q) for p, q in zip(params, per_rank[0][0], strict=True)):
                fail(
                    f"{what}: rank {rank}'s parameters differ from rank 0's. Every rank must start from "
                    "rank 0's "
                    "parameters (each made its own, from its own seed) and apply the same averaged gradients."
                )
        summed = train_alone(make_mlp(seed=seed + 1), data, targets, steps, lr * world_size)
        mistakes = {"sum the gradients over the ranks without dividing by the world size": summed}
        _compare(f"{what}: rank 0", per_rank[0][0], reference, mistakes if world_size > 1 else {})


# -- exercise: the loss of an uneven shard ---------------------------------------------------------


def _uneven_on_rank(
    rank: int, world_size: int, shard_loss: Callable, batch: int, steps: int, lr: float, seed: int
) -> list:
    model = make_mlp(seed=seed)
    data, targets = make_batch(batch, seed=seed + 1)
    x, y = data.tensor_split(world_size)[rank], targets.tensor_split(world_size)[rank]
    for _ in range(steps):
        model.zero_grad()
        loss = shard_loss(model(x), y, batch)
        if _type(loss) is not torch.Tensor or loss.dim() != 0 or not loss.requires_grad:
            raise TypeError(
                f"shard_loss returned {loss!r:.80}; it must return a 0-dimensional tensor with a graph"
            )
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                dist.all_reduce(p.grad)  # summed, as the exercise says
                p -= lr * p.grad
    return [p.detach().clone() for p in model.parameters()]


def _emulate_shards(loss: Callable, world_size: int, batch: int, steps: int, lr: float, seed: int) -> list:
    """What summing the ranks' gradients gives, computed in one process, for another loss."""
    model = make_mlp(seed=seed)
    data, targets = make_batch(batch, seed=seed + 1)
    for _ in range(steps):
        grads = [torch.zeros_like(p) for p in model.parameters()]
        for x, y in zip(data.tensor_split(world_size), targets.tensor_split(world_size), strict=True):
            model.zero_grad()
            loss(model(x), y, batch).backward()
            for g, p in zip(grads, model.parameters(), strict=True):
                g += p.grad
        with torch.no_grad():
            for p, g in zip(model.parameters(), grads, strict=True):
                p -= lr * g
    return [p.detach().clone() for p in model.parameters()]


def check_shard_loss(
    shard_loss: Callable, world_sizes: Sequence[int] = (3,), batch: int = 10, steps: int = 2, lr: float = 0.1
) -> None:
    """Check ``shard_loss(outputs, targets, global_count)`` in data-parallel training whose
    gradients are summed over the ranks: it must match one process on the whole batch, however
    unevenly the batch divides among the ranks."""
    __tracebackhide__ = True
    seed = fresh_seed()
    data, targets = make_batch(batch, seed=seed + 1)
    reference = train_alone(make_mlp(seed=seed), data, targets, steps, lr)
    for world_size in world_sizes:
        sizes = [len(s) for s in torch.arange(batch).tensor_split(world_size)]
        what = (
            f"training with shard_loss on {counted(world_size, 'rank')}, a batch of {batch} split as {sizes}"
        )
        per_rank = run_ranks(
            _uneven_on_rank, world_size, shard_loss, batch, steps, lr, seed, what="shard_loss"
        )
        _params_like(what, per_rank[0], reference)
        mistakes = {
            "take the mean over this rank's shard (every shard then weighs the same, whatever its size)": (
                _emulate_shards(lambda o, t, n: mse(o, t), world_size, batch, steps, lr, seed)
            ),
            "divide by the number of rows but not by the number of outputs in each": (
                _emulate_shards(lambda o, t, n: ((o - t) ** 2).sum() / n, world_size, batch, steps, lr, seed)
            ),
        }
        _compare(what, per_rank[0], reference, mistakes)


# -- exercise: one all_reduce for all the gradients ------------------------------------------------


def _rank_tensors(
    rank: int, shapes: Sequence[tuple[int, ...]], dtype: torch.dtype, seed: int
) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed + rank)
    return [torch.randn(shape, generator=generator).to(dtype) for shape in shapes]


def _flat_on_rank(
    rank: int, world_size: int, fn: Callable, shapes: list, dtype: torch.dtype, seed: int
) -> tuple:
    grads = _rank_tensors(rank, shapes, dtype, seed)
    originals = list(grads)  # in place means these tensors, whatever fn does to the list
    with CommLog() as log:
        fn(grads)
    return originals, log.summary()


def check_flat_all_reduce(
    fn: Callable,
    world_sizes: Sequence[int] = (2,),
    shapes: Sequence[tuple[int, ...]] = ((3, 4), (4,), ()),
    dtype: torch.dtype = torch.float32,
) -> None:
    """Check ``fn(grads)``: averages the tensors over the ranks, in place, with one all_reduce."""
    __tracebackhide__ = True
    total = sum(torch.Size(s).numel() for s in shapes)
    seed = fresh_seed()
    for world_size in world_sizes:
        name = getattr(fn, "__name__", "fn")
        what = f"{name} on {counted(world_size, 'rank')}, tensors of shapes {list(shapes)}, {dtype}"
        per_rank = run_ranks(
            _flat_on_rank, world_size, fn, list(shapes), dtype, seed, what="the flat all_reduce"
        )
        inputs = [_rank_tensors(r, shapes, dtype, seed) for r in range(world_size)]
        average = [sum(t[i].double() for t in inputs) / world_size for i in range(len(shapes))]
        for rank, (grads, summary) in enumerate(per_rank):
            calls = [numels for name, numels in summary["calls"] if name == "all_reduce"]
            if len(calls) != 1 or sum(calls[0]) != total:
                fail(
                    f"{what}: rank {rank} issued {len(calls)} all_reduce(s) of {[sum(c) for c in calls]} "
                    "elements; "
                    f"expected one, of all {total} elements at once (a flat buffer)."
                )
            others = {k: v for k, v in summary["collectives"].items() if k != "all_reduce"}
            if others:
                fail(f"{what}: rank {rank} also issued {others}; one all_reduce does it.")
            for i, (g, a) in enumerate(zip(grads, average, strict=True)):
                if _type(g) is not torch.Tensor or g.shape != a.shape or g.dtype != dtype:
                    fail(f"{what}: tensor {i} on rank {rank} is now {g!r:.80}; average it in place.")
                if not allclose(g.double(), a, rtol=1e-3, atol=1e-3):
                    hint = ""
                    if tensors_equal(g, inputs[rank][i]):
                        hint = (
                            " It still holds this rank's own values: copy the averaged buffer back into it."
                        )
                    elif allclose(g.double(), a * world_size, rtol=1e-3, atol=1e-3):
                        hint = " It holds the sum over the ranks: divide by the world size."
                    fail(f"{what}: tensor {i} on rank {rank} is not the average over the ranks.{hint}")


# -- exercises: overlapping communication with backward --------------------------------------------


def overlap_model(tie: bool = False, freeze: bool = False, seed: int = 0) -> nn.Sequential:
    """The model of the overlap checks: the MLP, with its first and last weights tied, or its
    first bias frozen, if asked."""
    model = make_mlp(seed=seed)
    if tie:
        model[-1].weight = model[0].weight
    if freeze:
        model[0].bias.requires_grad_(False)
    return model


def _overlap_batch(seed: int, step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    return make_batch(6, seed=seed + 1 + 100 * step + rank)


def _overlap_on_rank(
    rank: int, world_size: int, make_sync: Callable, model_kind: dict, steps: int, seed: int
) -> list:
    model = overlap_model(**model_kind, seed=seed)
    sync = make_sync(model)
    out = []
    for step in range(steps):
        model.zero_grad(set_to_none=True)
        x, y = _overlap_batch(seed, step, rank)
        timeline = Timeline()
        with recording_waits() as waited, timeline:
            mse(model(x), y).backward()
            timeline.events.append(("mark", "backward returned"))
            sync.finish()
        grads = [None if p.grad is None else p.grad.clone() for p in model.parameters()]
        out.append((grads, timeline.events, waited))
    return out


def _average_grads(model_kind: dict, world_size: int, step: int, seed: int) -> list:
    """Each parameter's gradient averaged over the ranks' data, computed in one process."""
    total: list = []
    for rank in range(world_size):
        model = overlap_model(**model_kind, seed=seed)
        x, y = _overlap_batch(seed, step, rank)
        mse(model(x), y).backward()
        grads = [p.grad for p in model.parameters()]
        total = (
            grads if not total else [None if a is None else a + b for a, b in zip(total, grads, strict=True)]
        )
    return [None if g is None else g / world_size for g in total]


def check_overlap(
    make_sync: Callable,
    world_sizes: Sequence[int] = (2,),
    buckets: Callable[[nn.Module], list[list[int]]] | None = None,
    model_kinds: Sequence[dict] = ({},),
    steps: int = 2,
) -> None:
    """Check a gradient synchroniser ``sync = make_sync(model)``, whose hooks start all_reduces
    during ``loss.backward()`` and whose ``sync.finish()`` waits for them: the gradients are
    averaged over the ranks, the all_reduces started while backward still had work to do, every
    handle was waited on, and, given ``buckets`` (the parameters' indices, by bucket), there was
    one all_reduce per bucket of the bucket's size; else one per parameter."""
    __tracebackhide__ = True
    seed = fresh_seed()
    for world_size in world_sizes:
        for kind in model_kinds:
            what = f"training step(s) on {counted(world_size, 'rank')}" + (
                f" of a model with {kind}" if kind else ""
            )
            per_rank = run_ranks(
                _overlap_on_rank, world_size, make_sync, dict(kind), steps, seed, what="the synchroniser"
            )
            params = list(overlap_model(**kind).parameters())
            expected = (
                [sum(params[i].numel() for i in bucket) for bucket in buckets(overlap_model(**kind))]
                if buckets
                else [p.numel() for p in params if p.requires_grad]
            )
            for step in range(steps):
                average = _average_grads(kind, world_size, step, seed)
                for rank in range(world_size):
                    grads, events, waited = per_rank[rank][step]
                    where = f"{what}, step {step + 1}, rank {rank}"
                    _check_overlap_step(
                        where, grads, events, waited, average, expected, bool(buckets), world_size
                    )


def _check_overlap_step(
    what: str,
    grads: list,
    events: list,
    waited: list,
    average: list,
    expected: list[int],
    bucketed: bool,
    world_size: int,
) -> None:
    __tracebackhide__ = True
    mark = next(i for i, e in enumerate(events) if e[0] == "mark")
    reduces = [
        (i, sum(n for n in e[3] if n)) for i, e in enumerate(events) if e[0] == "op" and e[2] == "allreduce_"
    ]
    late = [n for i, n in reduces if i > mark]
    if late:
        fail(
            f"{what}: {len(late)} of the {len(reduces)} all_reduces were issued after backward returned. "
            "Start each as soon as its gradients are ready, from a hook, so that it overlaps with the "
            "rest of backward."
        )
    # Issued before backward returned is not enough: issued all at once from the last hook, they
    # overlap with nothing. With more than one, the first must start before backward's last
    # matrix multiply (the first layer's weight gradient).
    matmuls = [i for i, e in enumerate(events[:mark]) if e[0] == "op" and e[2] in MATMUL_OPS]
    if len(expected) > 1 and reduces and matmuls and reduces[0][0] > matmuls[-1]:
        fail(
            f"{what}: the first all_reduce started only after backward's last matrix multiply, so none "
            "of them overlapped with backward's work. Start each as soon as its own gradients are final."
        )
    sizes = sorted(n for _, n in reduces)
    if sizes != sorted(expected):
        unit = "bucket (its gradients in one flat buffer)" if bucketed else "parameter"
        fail(f"{what}: the all_reduces moved {sizes} elements; expected one per {unit}: {sorted(expected)}.")
    if not all(waited):
        fail(
            f"{what}: finish() returned without waiting on {waited.count(False)} of the {len(waited)} "
            "all_reduce handles. Wait on every one before the optimizer uses the gradients: until then they "
            "may still change."
        )
    for i, (g, a) in enumerate(zip(grads, average, strict=True)):
        if (g is None) != (a is None):
            fail(f"{what}: parameter {i}'s gradient is {g!r:.60}; expected {'none' if a is None else 'one'}.")
        if g is not None and not allclose(g, a, rtol=1e-4, atol=1e-6):
            summed = allclose(g, a * world_size, rtol=1e-4, atol=1e-6)
            hint = " It is the sum over the ranks: divide by the world size." if summed else ""
            fail(f"{what}: parameter {i}'s gradient is not the average over the ranks after finish().{hint}")


# -- exercise: gradient accumulation ---------------------------------------------------------------

MICRO_ROWS = 3


def _micro_batch(seed: int, rank: int, i: int) -> tuple[torch.Tensor, torch.Tensor]:
    return make_batch(MICRO_ROWS, seed=seed + 1 + 100 * rank + i)


def _accumulate_on_rank(rank: int, world_size: int, step: Callable, k: int, lr: float, seed: int) -> tuple:
    model = make_mlp(seed=seed)
    micro = [_micro_batch(seed, rank, i) for i in range(k)]
    # A Timeline, not a CommLog: torch 2.13's CommDebugMode breaks a module's forward hooks.
    timeline = Timeline()
    model.register_forward_pre_hook(
        lambda module, inputs: timeline.events.append(("forward", inputs[0].shape[0]))
    )
    with timeline:
        step(model, micro, lr)
    forwards = [e[1] for e in timeline.events if e[0] == "forward"]
    last_forward = max((i for i, e in enumerate(timeline.events) if e[0] == "forward"), default=-1)
    reduces = [
        (i, sum(n for n in e[3] if n))
        for i, e in enumerate(timeline.events)
        if e[0] == "op" and e[2] == "allreduce_"
    ]
    early = sum(1 for i, _ in reduces if i < last_forward)
    reduced = sum(n for _, n in reduces)
    return [p.detach().clone() for p in model.parameters()], forwards, early, reduced


def check_accumulation(
    step: Callable, world_sizes: Sequence[int] = (2,), k: int = 3, lr: float = 0.1
) -> None:
    """Check ``step(model, micro_batches, lr)``: one SGD step over this rank's ``k`` micro-batches
    and every other rank's, as one process would take it on all of them, each micro-batch
    forwarded on its own, and the gradients communicated once, after the last micro-batch."""
    __tracebackhide__ = True
    total = sum(p.numel() for p in make_mlp().parameters())
    seed = fresh_seed()
    for world_size in world_sizes:
        what = f"step on {counted(world_size, 'rank')} with {k} micro-batches each"
        per_rank = run_ranks(_accumulate_on_rank, world_size, step, k, lr, seed, what="the accumulating step")
        batches = [_micro_batch(seed, r, i) for r in range(world_size) for i in range(k)]
        data, targets = torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches])
        reference = train_alone(make_mlp(seed=seed), data, targets, 1, lr)
        for rank, (params, forwards, early, reduced) in enumerate(per_rank):
            if forwards != [MICRO_ROWS] * k:
                fail(
                    f"{what}: rank {rank}'s model ran forward on batches of {forwards} rows; expected {k} "
                    f"forwards of {MICRO_ROWS} rows, one per micro-batch. (A batch too large for memory is "
                    "the reason for micro-batches: they are not concatenated.)"
                )
            if early:
                fail(
                    f"{what}: rank {rank} issued {counted(early, 'all_reduce')} before the forward of "
                    "its last micro-batch. Communicate the gradients once, after the last micro-batch: "
                    "the others only accumulate."
                )
            # The gradients once; a logged loss or two may be all_reduced too.
            if not total <= reduced < 2 * total:
                fail(
                    f"{what}: rank {rank}'s all_reduces moved {reduced} elements in all; the model has "
                    f"{total} parameters. Communicate the gradients once, after the last micro-batch."
                )
            _params_like(f"{what}: rank {rank}", params, reference)
            not_scaled = train_alone(make_mlp(seed=seed), data, targets, 1, lr * k)
            _compare(
                f"{what}: rank {rank}",
                params,
                reference,
                {"add up the micro-batches' gradients without dividing by their number": not_scaled},
            )
