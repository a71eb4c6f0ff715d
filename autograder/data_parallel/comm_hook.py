"""Notebook 04's check of a communication hook for torch's DistributedDataParallel that sends
the gradients in bfloat16: what went over the wire, and how far the result is from the exact
average (at most what bfloat16's rounding explains, and never the sum)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from ..checks import counted, fail, fresh_seed, run_ranks
from ..comm import recording_waits
from .model import make_batch, make_mlp, mse

# Small enough that DDP makes several buckets of the 16-wide MLP once it rebuilds them (step 2).
BUCKET_CAP_MB = 0.002
BF16_ROUNDING = torch.finfo(torch.bfloat16).eps / 2  # 2^-8: rounding to bfloat16 errs by at most this


def _batch(seed: int, step: int, rank: int, dtype: str) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = make_batch(5, seed=seed + 1 + 100 * step + rank)
    return x.to(getattr(torch, dtype)), y.to(getattr(torch, dtype))


def _hooked_on_rank(rank: int, world_size: int, hook: Callable, dtype: str, steps: int, seed: int) -> list:
    model = make_mlp(seed=seed).to(getattr(torch, dtype))
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=BUCKET_CAP_MB)
    given: list = []  # (the bucket's dtype, the dtype of what the hook's future gave)
    ddp.register_comm_hook(None, _watching_values(hook, given))
    out = []
    for step in range(steps):
        model.zero_grad()
        before = [p.detach().clone() for p in model.parameters()]
        x, y = _batch(seed, step, rank, dtype)
        events: list = []
        with recording_waits(events):
            mse(ddp(x), y).backward()
            events.append(("end",))
        grads = [p.grad.detach().clone() for p in model.parameters()]
        issues = [(e[2], e[3]) for e in events if e[0] == "issue"]
        early = [e for e in events[: events.index(("end",))] if e[0] == "wait"]
        out.append((before, grads, issues, len(early), [pair for pair in given if pair[0] != pair[1]]))
        given.clear()
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.1 * p.grad
    del ddp  # before the process group goes: a DDP object that outlives it can hang on Gloo
    return out


def _watching_values(hook: Callable, given: list) -> Callable:
    """``hook``, noting the dtype of the tensor its future gives back against its bucket's (DDP
    would copy any dtype into the gradients, so the result alone cannot tell)."""

    # Unannotated: DDP refuses a hook whose annotations are not its own classes, and here they
    # would be strings (postponed annotations).
    def watched(state, bucket):
        dtype = bucket.buffer().dtype
        future = hook(state, bucket)
        if not isinstance(future, torch.futures.Future):
            return future  # DDP itself says what is wrong with it

        def note(done: torch.futures.Future) -> object:
            value = done.value()
            tensor = value[0] if isinstance(value, list) and value else value
            given.append((dtype, getattr(tensor, "dtype", None)))
            return value

        return future.then(note)

    return watched


def _local(before: list[torch.Tensor], world_size: int, dtype: str, step: int, seed: int) -> list[list]:
    """Each rank's own gradients at a step, from the parameters the ranks had then, computed here."""
    model = make_mlp(seed=seed).to(getattr(torch, dtype))
    with torch.no_grad():
        for p, b in zip(model.parameters(), before, strict=True):
            p.copy_(b)
    per_rank = []
    for rank in range(world_size):
        model.zero_grad()
        x, y = _batch(seed, step, rank, dtype)
        mse(model(x), y).backward()
        per_rank.append([p.grad.clone() for p in model.parameters()])
    return per_rank


def check_compression_hook(
    hook: Callable, world_sizes: Sequence[int] = (2,), dtype: str = "float32", steps: int = 2
) -> None:
    """Check ``hook(state, bucket)`` registered on DDP (``ddp.register_comm_hook(None, hook)``):
    each bucket sent in one all_reduce of bfloat16, not waited on inside backward, and the
    gradients after backward within bfloat16's rounding of the average over the ranks, in the
    parameters' own dtype."""
    __tracebackhide__ = True
    seed = fresh_seed()
    total = sum(p.numel() for p in make_mlp().parameters())
    name = getattr(hook, "__name__", "the hook")
    for world_size in world_sizes:
        what = f"DDP with {name} on {counted(world_size, 'rank')}, a {dtype} model"
        per_rank = run_ranks(_hooked_on_rank, world_size, hook, dtype, steps, seed, what=name)
        for rank, results in enumerate(per_rank):
            for step, (before, grads, issues, early, other_dtypes) in enumerate(results):
                where = f"{what}, step {step + 1}, rank {rank}"
                local = _local(before, world_size, dtype, step, seed)
                sent = sum(n for n, _ in issues)
                if sent != total or len(issues) < 1:
                    fail(
                        f"{where}: the hook's all_reduces carried {sent} elements; the model has {total} "
                        "gradients. Send the bucket's whole buffer, once."
                    )
                kinds = sorted({str(d).removeprefix("torch.") for _, d in issues})
                if kinds != ["bfloat16"]:
                    fail(
                        f"{where}: the all_reduces carried {', '.join(kinds)}; compress the bucket to "
                        "bfloat16 before it goes over the wire, and back after."
                    )
                if early:
                    fail(
                        f"{where}: the hook waited on its all_reduce before backward was over. Return a "
                        "future (the handle's, chained with then()) without waiting: DDP waits for it "
                        "after backward, and meanwhile backward goes on."
                    )
                if other_dtypes:
                    bucket, gave = other_dtypes[0]
                    fail(
                        f"{where}: the hook's future gave {str(gave).removeprefix('torch.')} values for a "
                        f"{str(bucket).removeprefix('torch.')} bucket. DDP copies them into the gradients "
                        "anyway, but a hook's result is the average in the bucket's own dtype: convert it "
                        "back in then()."
                    )
                _expect_compressed_average(where, grads, local, rank)


def _expect_compressed_average(what: str, grads: list, local: list[list[torch.Tensor]], rank: int) -> None:
    __tracebackhide__ = True
    world_size = len(local)
    for i, g in enumerate(grads):
        if type(g) is not torch.Tensor or g.shape != local[rank][i].shape:
            fail(f"{what}: parameter {i}'s gradient is {g!r:.60}; expected a tensor of its shape.")
        exact = sum(grad[i].double() for grad in local) / world_size
        scale = sum(grad[i].double().abs() for grad in local) / world_size
        # Each rank's value rounded to bfloat16, then a rounding per addition and one for the division:
        # (world size + 1) roundings of the values' size at most, whatever the order; one spare.
        bound = BF16_ROUNDING * (world_size + 2) * scale + 1e-12
        error = (g.double() - exact).abs()
        if g.dtype != local[rank][i].dtype:
            fail(
                f"{what}: parameter {i}'s gradient came back {g.dtype}; the parameter is "
                f"{local[rank][i].dtype}."
            )
        if bool((error <= bound).all()):
            continue
        hint = ""
        if world_size > 1 and bool(((g.double() - exact * world_size).abs() <= bound * world_size).all()):
            hint = " It is the sum over the ranks: divide by the world size (before compressing, or after)."
        elif world_size > 1 and bool(((g.double() - local[rank][i].double()).abs() <= bound).all()):
            hint = (
                " It is this rank's own gradient: the future's value must be the averaged buffer (written "
                "into bucket.buffer(), or returned)."
            )
        fail(
            f"{what}: parameter {i}'s gradient is off the average over the ranks by up to "
            f"{(error / scale.clamp_min(1e-30)).max().item():.3g} of its size; bfloat16's rounding explains "
            f"at most {BF16_ROUNDING * (world_size + 2):.3g}.{hint}"
        )
