"""Check of notebook 07's clipping of sharded gradients by their global norm: each rank holds its
own shards of the gradients, drawn inside the rank; the norm and the clipped shards must equal
what ``torch.nn.utils.clip_grad_norm_`` gives the whole gradient, and the ranks may share a few
numbers only, never the gradients themselves."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch

from ..checks import allclose, counted, fail, private_generator, run_ranks
from ..comm import CommLog
from .common import _close, _contributions, _counts, _type

EPS = 1e-6  # what torch's clip_grad_norm_ adds to the norm it divides by


def _shard_sizes(numels: Sequence[int], world_size: int, rank: int) -> list[int]:
    """This rank's piece of each flat gradient, as FSDP2 cuts rows: uneven, maybe empty."""
    return [len(torch.arange(n).tensor_split(world_size)[rank]) for n in numels]


def _clip_on_rank(rank: int, world_size: int, clip: Callable, numels: list, cases: list) -> list[dict]:
    generator = private_generator()  # this rank's gradients: no other rank can know them
    results = []
    for scale, max_norm in cases:
        shards = [scale * torch.randn(n, generator=generator) for n in _shard_sizes(numels, world_size, rank)]
        drawn = [s.clone() for s in shards]
        with CommLog(count_collectives=False) as log:
            norm = clip(shards, max_norm)
        summary = log.summary()
        results.append(
            {
                "drawn": drawn,
                "clipped": [s.detach().clone() for s in shards],
                "norm": norm.item() if _type(norm) is torch.Tensor and norm.numel() == 1 else norm,
                "counts": _counts(summary),
                "sent": _contributions(summary),
            }
        )
    return results


def _reference(drawn: list[torch.Tensor], max_norm: float) -> tuple[float, float]:
    """The whole gradient's norm and the factor torch's clip_grad_norm_ scales it by."""
    whole = torch.cat(drawn).double()
    norm = whole.norm().item()
    return norm, min(1.0, max_norm / (norm + EPS))


def _close_at_scale(a: torch.Tensor, b: torch.Tensor) -> bool:
    """``a`` equals ``b`` to a part in 10^4 of ``b``'s own size: gradients of 1e-7 are compared as
    closely as gradients of 1."""
    scale = b.abs().max().item() if b.numel() else 0.0
    return (
        _type(a) is torch.Tensor
        and a.shape == b.shape
        and allclose(a.double(), b.double(), rtol=1e-4, atol=1e-6 * scale)
    )


def _epsilon_hint(before: torch.Tensor, after: torch.Tensor, norm: float, max_norm: float) -> str:
    """What a factor that differs from torch's only at tiny norms says about where the 1e-6 went."""
    misplaced = {
        "max_norm / norm, leaving out the 1e-6": max_norm / norm,
        "max_norm / norm + 1e-6, the 1e-6 added to the factor": max_norm / norm + EPS,
        "(max_norm + 1e-6) / norm": (max_norm + EPS) / norm,
        "max_norm / max(norm, 1e-6)": max_norm / max(norm, EPS),
        "max_norm / sqrt(sum of squares + 1e-6), the 1e-6 under the square root": max_norm
        / math.sqrt(norm**2 + EPS),
    }
    for how, factor in misplaced.items():
        if factor < 1 and _close_at_scale(after, before * factor):
            return (
                f" They were scaled by {how}. torch divides by the norm plus 1e-6, max_norm / (norm + "
                f"1e-6): at a norm of {norm:.3g} the 1e-6 is no rounding error."
            )
    return ""


def check_clip_sharded(
    clip: Callable,
    world_sizes: Sequence[int] = (2,),
    numels: Sequence[int] = (40, 7, 33),
    cases: Sequence[tuple[float, float]] = ((1.0, 1.0), (0.01, 5.0), (5e-7, 1e-6)),
) -> None:
    """Check ``clip(shards, max_norm)`` for each (gradient scale, max_norm) case: it returns the
    global norm of the gradients whose shards the ranks hold, scales them in place as torch's
    ``clip_grad_norm_`` would scale the whole, and shares only a few numbers."""
    __tracebackhide__ = True
    name = getattr(clip, "__name__", "the function")
    for world_size in world_sizes:
        every_case = run_ranks(_clip_on_rank, world_size, clip, list(numels), list(cases), what=name)
        for case, (_, max_norm) in enumerate(cases):
            what = (
                f"{name} on {counted(world_size, 'rank')}, gradients of {list(numels)} elements, "
                f"max_norm={max_norm}"
            )
            per_rank = [r[case] for r in every_case]
            drawn = [s for r in per_rank for s in r["drawn"]]
            norm, factor = _reference(drawn, max_norm)
            for rank, result in enumerate(per_rank):
                _expect_clipped(f"{what}: rank {rank}", result, norm, factor, max_norm, world_size, per_rank)


def _expect_clipped(
    where: str, result: dict, norm: float, factor: float, max_norm: float, world_size: int, per_rank: list
) -> None:
    __tracebackhide__ = True
    got = result["norm"]
    if _type(got) not in (float, int) or not math.isfinite(got):
        fail(f"{where} returned {got!r:.80}; expected the gradients' global norm, a float.")
    if not math.isclose(got, norm, rel_tol=1e-5):
        own = torch.cat(result["drawn"]).double().norm().item()
        norms = [torch.cat(r["drawn"]).double().norm().item() for r in per_rank]
        mistakes = {
            "take the norm of this rank's shard only": own,
            "add up the ranks' norms (norms do not add: their squares do)": sum(norms),
            "add up the ranks' norms and take the square root": math.sqrt(sum(norms)),
            "average the squares over the ranks (ReduceOp.AVG) instead of adding them": norm
            / math.sqrt(world_size),
            "forget the square root": norm**2,
            "return the norm after clipping: like clip_grad_norm_, return the norm the gradients had "
            "before it": norm * factor,
        }
        on_one_rank = ("forget the square root", "return the norm after clipping")
        message = f"{where} returned a norm of {got:.6g}; the whole gradient's norm is not that."
        for mistake, value in mistakes.items():
            if (world_size > 1 or mistake.startswith(on_one_rank)) and math.isclose(got, value, rel_tol=1e-5):
                message += f" That is what you get if you {mistake}."
                break
        fail(message)
    for i, (before, after) in enumerate(zip(result["drawn"], result["clipped"], strict=True)):
        # The first comparison is absolute, the second relative: gradients of 1e-7 are told apart.
        if not _close(after, before * factor) or not _close_at_scale(after, before * factor):
            hint = ""
            if _close_at_scale(after, before):
                hint = " They were left as they were." if factor < 1 else ""
            elif _close_at_scale(after, before * max_norm / (norm + EPS)):
                hint = (
                    f" They were scaled by max_norm / norm = {max_norm / norm:.3g}: clipping only ever "
                    "shrinks gradients; below max_norm they stay as they are."
                )
            else:
                hint = _epsilon_hint(before, after, norm, max_norm)
            fail(
                f"{where}: shard {i} after clipping differs from the whole gradient clipped by torch's "
                f"clip_grad_norm_ (which scales it by {factor:.4g}).{hint}"
            )
    if world_size == 1:
        return
    if not result["counts"]:
        fail(
            f"{where} issued no collectives; each rank holds only its shards, so the ranks must combine "
            "something, and a few numbers are enough: the gradients themselves need not travel."
        )
    few = len(result["drawn"]) + 1  # a sum of squares per shard, and one more
    for name, n in result["sent"]:
        if n > few:
            fail(
                f"{where}: it put {n} elements into one {name}; a few numbers from each rank are enough (at "
                f"most {few} here), not the gradients themselves."
            )
