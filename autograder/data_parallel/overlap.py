"""Notebook 04's checks of all_reduces overlapped with backward, per parameter and in buckets.

A rank records, in one list of events and in the order they happen: each gradient becoming final
(``("ready", i)``, from a hook of the check's), the end of each backward (``("end",)``), and each
all_reduce started and waited on (`recording_waits`). A backend may put a result in its tensor at
any moment from the end of the all_reduce to the wait on its handle, and the check makes each
extreme certain in turn: at odd steps the results land only when their handles are waited on, so
reading a result too early fails every time, not by luck; at even steps they are all in their
tensors when backward returns, as real Gloo's are once done (`landing_when_backward_ends`), so that
something kept from an earlier step that touches them again (a list of handles never emptied) fails
every time too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

import torch
import torch.distributed as dist
from torch import nn

from ..checks import allclose, counted, fail, fresh_seed, run_ranks
from ..comm import recording_waits
from .model import ShuffledMLP, close, make_batch, make_mlp, mse


def overlap_model(
    tie: bool = False, freeze: bool = False, shuffled: bool = False, dtype: str = "float32", seed: int = 0
) -> nn.Module:
    """The model of the overlap checks: the MLP (its first and last weights tied, or its first
    bias frozen, if asked), or `ShuffledMLP`, in float32 or float64."""
    model = ShuffledMLP(seed=seed) if shuffled else make_mlp(seed=seed)
    if tie:
        model[-1].weight = model[0].weight
    if freeze:
        model[0].bias.requires_grad_(False)
    return model.to(getattr(torch, dtype))


class Recorder:
    """Notes in ``events`` each forward of ``model`` (``("forward", rows)``), each of its gradients
    once final (``("ready", i)``, ``i`` its index in ``model.parameters()``) and the end of each
    backward (``("end",)``, after every hook of that backward has run)."""

    def __init__(self, model: nn.Module, events: list) -> None:
        self.events, self._queued = events, False
        self.at_end: Callable[[], None] | None = None  # run once each backward has run everything
        for i, p in enumerate(model.parameters()):
            if p.requires_grad:
                p.register_post_accumulate_grad_hook(lambda _, i=i: self._ready(i))
        model.register_forward_pre_hook(lambda module, inputs: events.append(("forward", inputs[0].shape[0])))

    def _ready(self, i: int) -> None:
        self.events.append(("ready", i))
        if not self._queued:  # the engine calls it back once this backward has run everything
            self._queued = True
            torch.autograd.Variable._execution_engine.queue_callback(self._end)

    def _end(self) -> None:
        self._queued = False
        if self.at_end is not None:
            self.at_end()
        self.events.append(("end",))


@contextlib.contextmanager
def landing_when_backward_ends(recorder: Recorder) -> Iterator[None]:
    """While active, every all_reduce started (on real Gloo) has put its result in its tensors by
    the time the backward that ``recorder`` watches returns: its work is waited on there, by the
    check, which neither notes it as waited on nor holds anything back. Enter it before
    `recording_waits`, which then wraps what this wraps."""
    original = dist.ProcessGroup.allreduce
    saved = vars(dist.ProcessGroup)["allreduce"]
    works: list = []

    def allreduce(group: dist.ProcessGroup, tensors: object, *args: object, **kwargs: object) -> object:
        work = original(group, tensors, *args, **kwargs)
        works.append(work)
        return work

    def land() -> None:
        while works:
            works.pop(0).wait()

    dist.ProcessGroup.allreduce = allreduce
    recorder.at_end = land
    try:
        yield
    finally:
        recorder.at_end = None
        dist.ProcessGroup.allreduce = saved


def _batch(seed: int, step: int, rank: int, dtype: str) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = make_batch(6, seed=seed + 1 + 100 * step + rank)
    return x.to(getattr(torch, dtype)), y.to(getattr(torch, dtype))


def _overlap_on_rank(
    rank: int, world_size: int, make_sync: Callable, kind: dict, steps: int, seed: int
) -> list:
    model = overlap_model(**kind, seed=seed)
    sync = make_sync(model)
    events: list = []
    # After the synchroniser's hooks: a gradient's hooks run in the order they were registered.
    recorder = Recorder(model, events)
    out = []
    for step in range(steps):
        model.zero_grad(set_to_none=True)
        x, y = _batch(seed, step, rank, kind.get("dtype", "float32"))
        events.clear()
        # Step 1, 3, ...: results held back until waited on; step 2, 4, ...: all in when backward ends.
        landing = step % 2 == 1
        with (
            landing_when_backward_ends(recorder) if landing else contextlib.nullcontext(),
            recording_waits(events, deliver_on_wait=not landing) as waited,
        ):
            mse(model(x), y).backward()
            sync.finish()
        grads = [None if p.grad is None else p.grad.detach().clone() for p in model.parameters()]
        out.append((grads, list(events), list(waited)))
    return out


def _local_grads(kind: dict, rank: int, step: int, seed: int) -> list:
    """A rank's own gradients at a step, computed here."""
    model = overlap_model(**kind, seed=seed)
    x, y = _batch(seed, step, rank, kind.get("dtype", "float32"))
    mse(model(x), y).backward()
    return [p.grad for p in model.parameters()]


def check_overlap(
    make_sync: Callable,
    world_sizes: Sequence[int] = (2,),
    buckets: Sequence[Sequence[int]] | None = None,
    model_kinds: Sequence[dict] = ({},),
    steps: int = 2,
) -> None:
    """Check a gradient synchroniser ``sync = make_sync(model)``, whose hooks start all_reduces
    during ``loss.backward()`` and whose ``sync.finish()`` waits for them. Without ``buckets``:
    one all_reduce per parameter, each started in its own gradient's hook. With ``buckets``
    (indices into ``model.parameters()``): one per bucket, of its gradients in one flat buffer,
    started in the hook that completes it, but never before the buckets listed before it (DDP's
    rule). No handle waited on before backward returns; every one waited on before finish()
    returns; the gradients then averaged over the ranks. ``model_kinds`` are `overlap_model`'s
    keywords."""
    __tracebackhide__ = True
    seed = fresh_seed()
    for world_size in world_sizes:
        for kind in model_kinds:
            what = f"{counted(steps, 'training step')} on {counted(world_size, 'rank')}" + (
                f" of a model with {kind}" if kind else ""
            )
            per_rank = run_ranks(
                _overlap_on_rank, world_size, make_sync, dict(kind), steps, seed, what="the synchroniser"
            )
            params = list(overlap_model(**kind).parameters())
            groups = (
                [list(b) for b in buckets]
                if buckets
                else [[i] for i, p in enumerate(params) if p.requires_grad]
            )
            for step in range(steps):
                local = [_local_grads(kind, rank, step, seed) for rank in range(world_size)]
                for rank in range(world_size):
                    grads, events, waited = per_rank[rank][step]
                    where = f"{what}, step {step + 1}, rank {rank}"
                    expect_launches(
                        where,
                        events,
                        groups,
                        params,
                        ordered=bool(buckets),
                        hooks_first=True,
                        earlier=step > 0,
                    )
                    expect_waits(where, events, waited)
                    expect_average(where, grads, local, rank)


def launch_plan(
    events: list, groups: list[list[int]], params: list[torch.Tensor], ordered: bool, hooks_first: bool
) -> list[tuple[int, int]]:
    """When each group's all_reduce should start, as (gradients final before it starts, elements),
    in the order of starting: in the hook of the gradient that completes it (and, ``ordered``,
    every group before it). ``hooks_first``: the synchroniser's hooks run before the check's."""
    ready = [e[1] for e in events if e[0] == "ready"]
    position = {i: n for n, i in enumerate(ready)}
    done, plan = -1, []
    for group in groups:
        completes = max(position.get(i, len(ready)) for i in group)
        done = max(done, completes) if ordered else completes
        plan.append((done if hooks_first else done + 1, sum(params[i].numel() for i in group)))
    return sorted(plan, key=lambda step: step[0]) if not ordered else plan


def started(events: list) -> list[tuple[int, int]]:
    """Each all_reduce of more than one element, as (gradients final before it started, elements);
    after the end of backward, the first number is None."""
    out, ready, ended = [], 0, False
    for event in events:
        if event[0] == "ready":
            ready += 1
        elif event[0] == "end":
            ended = True
        elif event[0] == "issue" and event[2] > 1:  # a logged loss is no gradient
            out.append((None if ended else ready, event[2]))
    return out


def expect_launches(
    what: str,
    events: list,
    groups: list[list[int]],
    params: list,
    ordered: bool,
    hooks_first: bool,
    earlier: bool = False,
) -> None:
    """Fail, naming the mistake, unless the all_reduces started as `launch_plan` says. ``earlier``:
    an earlier step on the same synchroniser passed this check."""
    __tracebackhide__ = True
    plan, actual = launch_plan(events, groups, params, ordered, hooks_first), started(events)
    if actual == plan:
        return
    unit = "bucket (its gradients in one flat buffer)" if ordered else "parameter"
    late = [n for when, n in actual if when is None]
    if late:
        fail(
            f"{what}: {len(late)} of the {len(actual)} all_reduces started after backward had computed "
            "every gradient. Start each from a hook, as soon as its gradients are final, so that it "
            "overlaps with the rest of backward."
        )
    if sorted(n for _, n in actual) != sorted(n for _, n in plan):
        named = ""
        each = sorted(params[i].numel() for group in groups for i in group)
        if not actual and earlier:
            named = (
                " None started, where step 1's did: something kept from the earlier step stops them from "
                "starting, such as a count of the gradients still to come never reset after a step."
            )
        elif ordered and len(actual) > len(plan) and sorted(n for _, n in actual) == each:
            named = (
                " That is one all_reduce per parameter: copy each bucket's gradients into one flat buffer "
                "and all_reduce that once."
            )
        fail(
            f"{what}: the all_reduces moved {[n for _, n in actual]} elements; expected one per {unit}: "
            f"{[n for _, n in plan]}.{named}"
        )
    if ordered and [n for _, n in actual] != [n for _, n in plan]:
        fail(
            f"{what}: the buckets' all_reduces started in the order of their sizes {[n for _, n in actual]}; "
            f"the buckets are listed as {[n for _, n in plan]}. Bucket i may start only once buckets "
            "0 to i-1 have: every rank must issue its collectives in the same order (NCCL hangs "
            "otherwise), and gradients can become final in another order than the buckets list them."
        )
    index = next(k for k, (a, p) in enumerate(zip(actual, plan, strict=True)) if a != p)
    (when, numel), (due, _) = actual[index], plan[index]
    if when > due:
        fail(
            f"{what}: an all_reduce of {numel} elements started {counted(when - due, 'gradient')} after "
            "it could have. Start it in the hook of the gradient that completes it"
            + (
                " (or, if it waits for an earlier bucket, in the hook that completes that one)."
                if ordered
                else "."
            )
        )
    fail(
        f"{what}: an all_reduce of {numel} elements started before "
        + (
            "the buckets listed before it had started: bucket i starts only after buckets 0 to i-1."
            if ordered
            else "its gradient was final."
        )
        + " Do not count on the order in which gradients arrive: it is the reverse of the order in "
        "which the layers ran, which need not be the order in which the model lists them."
    )


def expect_waits(what: str, events: list, waited: list[bool]) -> None:
    """Fail unless every handle was waited on, and none before backward ended."""
    __tracebackhide__ = True
    end = next((k for k, e in enumerate(events) if e[0] == "end"), len(events))
    early = [e[1] for e in events[:end] if e[0] == "wait"]
    if early:
        fail(
            f"{what}: {counted(len(early), 'all_reduce')} {'was' if len(early) == 1 else 'were'} waited on "
            "before backward returned (a "
            "blocking all_reduce, or a wait inside a hook): backward stood still until the "
            "communication was over, so nothing overlapped. Keep the handles, and wait on them after "
            "backward."
        )
    if not all(waited):
        fail(
            f"{what}: finish() returned without waiting on {waited.count(False)} of the {len(waited)} "
            "all_reduce handles. Wait on every one before the optimizer uses the gradients: until then "
            "they may still change."
        )


def expect_average(what: str, grads: list, local: list[list], rank: int, after: str = "finish()") -> None:
    """Fail unless each gradient is the average over the ranks of ``local`` (each rank's own),
    as it is after ``after`` (what the message names), to the tolerance of its dtype."""
    __tracebackhide__ = True
    world_size = len(local)
    for i, g in enumerate(grads):
        mine = local[rank][i]
        if (g is None) != (mine is None):
            fail(
                f"{what}: parameter {i}'s gradient is {g!r:.60}; expected "
                f"{'none' if mine is None else 'one'}."
            )
        if g is None:
            continue
        if type(g) is not torch.Tensor:
            fail(f"{what}: parameter {i}'s gradient is a {type(g).__name__}; expected a tensor.")
        average = sum(grad[i].double() for grad in local) / world_size
        if close(g, average.to(mine.dtype)):
            continue
        if g.dtype != mine.dtype:
            fail(f"{what}: parameter {i}'s gradient is {g.dtype}; the parameter is {mine.dtype}.")
        hint = ""
        if world_size > 1 and close(g, (average * world_size).to(g.dtype)):
            hint = " It is the sum over the ranks: divide by the world size" + (
                ", after waiting: a result changed before its handle is waited on may still be overwritten."
                if after == "finish()"
                else "."
            )
        elif world_size > 1 and close(g, (average / world_size).to(g.dtype)):
            hint = (
                " It is the average divided by the world size once more: something kept from an earlier "
                "step (a list of handles never emptied, say) was waited on and divided again. Leave "
                "nothing from one step for the next."
            )
        elif world_size > 1 and any(close(g, (mine.double() / d).to(g.dtype)) for d in (1, world_size)):
            hint = (
                " It holds this rank's own gradient: the all_reduce's result was read (or copied back) "
                "before its handle was waited on, or never."
            )
        elif g.dtype is torch.float64 and allclose(g, average, rtol=1e-5, atol=1e-7):
            hint = " It is right to float32's precision: was it reduced in float32?"
        tolerance = "1e-10 (float64)" if g.dtype is torch.float64 else "1e-4"
        largest = (g.double() - average).abs().max().item()
        fail(
            f"{what}: parameter {i}'s gradient after {after} is not the average over the ranks "
            f"(to a relative {tolerance}; largest difference {largest:.3g}).{hint}"
        )
