"""Exercise 1's check: two partial attentions, each over its own keys, merged with their log-sum-exp."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..checks import expect_floats, fail
from .layouts import attention


def _partial(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return attention(q, k, v, causal=False)


def _cases(hidden: bool) -> list[dict]:
    cases = [{"dtype": torch.float64, "split": 3, "keys": 7, "scale": 1.0}]
    if hidden:
        cases += [
            {"dtype": torch.float32, "split": 5, "keys": 9, "scale": 1.0},
            {"dtype": torch.float32, "split": 2, "keys": 6, "scale": 600.0},  # scores near 1e3
            {"dtype": torch.float64, "split": 4, "keys": 8, "scale": 1500.0},  # past float64's exp
            {"dtype": torch.float64, "split": 1, "keys": 5, "scale": 1.0, "empty": "a"},
            {"dtype": torch.float32, "split": 4, "keys": 5, "scale": 1.0, "empty": "b"},
        ]
    return cases


def check_merge(merge: Callable, hidden: bool = False) -> None:
    """``merge(out_a, lse_a, out_b, lse_b)`` must give the attention over both key sets, and its
    log-sum-exp: for scores near 1e3 too, and when one side saw no keys (lse -inf, rows zero)."""
    __tracebackhide__ = True
    for case in _cases(hidden):
        gen = torch.Generator().manual_seed(int(case["scale"] * 7) + case["keys"])
        dtype = case["dtype"]
        q = torch.randn(2, 4, 3, generator=gen, dtype=torch.float64) * case["scale"]
        k = torch.randn(2, case["keys"], 3, generator=gen, dtype=torch.float64)
        v = torch.randn(2, case["keys"], 3, generator=gen, dtype=torch.float64)
        split = case["split"]
        out_a, lse_a = _partial(q, k[:, :split], v[:, :split])
        out_b, lse_b = _partial(q, k[:, split:], v[:, split:])
        expected, expected_lse = _partial(q, k, v)
        empty = case.get("empty")
        where = f"{dtype}, {split} and {case['keys'] - split} keys, scores scaled by {case['scale']:g}"
        if empty:  # one side saw no keys: its rows are zero and its lse -inf
            side = (out_a, lse_a) if empty == "a" else (out_b, lse_b)
            side[0].zero_()
            side[1].fill_(float("-inf"))
            expected, expected_lse = (out_b, lse_b) if empty == "a" else (out_a, lse_a)
            where = f"{dtype}, partial {empty} over no keys (lse -inf, output rows zero)"
        given = [t.to(dtype) for t in (out_a, lse_a, out_b, lse_b)]
        copies = [t.clone() for t in given]
        result = merge(*given)
        if not isinstance(result, tuple) or len(result) != 2:
            fail(f"merge ({where}): expected a tuple (out, lse), got {type(result).__name__}.")
        out, lse = result
        for before, after in zip(copies, given, strict=True):
            if not torch.equal(before, after):
                fail(f"merge ({where}) changed one of its inputs in place: return new tensors.")
        mistakes = _mistakes(out_a, lse_a, out_b, lse_b)
        nan = (
            "exp of a log-sum-exp near 1e3 overflows: exponentiate only differences from the larger of "
            "the two (the running maximum), as the softmax subtracts the row's maximum"
            if not empty
            else "a side with lse -inf saw no keys and must weigh nothing: exp(-inf - m) is 0, but "
            "-inf - (-inf) is NaN; take the maximum of the two, which is finite here"
        )
        expect_floats(
            f"merge's out ({where})",
            out,
            expected.to(dtype),
            "the attention over both key sets",
            mistakes={k: v.to(dtype) for k, v in mistakes.items()},
            nan_means=nan,
            atol=1e-3 if dtype == torch.float32 else 1e-9,
        )
        lse_mistakes = {
            "keep the larger log-sum-exp: both sides' exponentials add up": torch.maximum(lse_a, lse_b),
            "add the two log-sum-exps: the exponentials add, so the logs combine by logaddexp": lse_a + lse_b,
        }
        expect_floats(
            f"merge's lse ({where})",
            lse,
            expected_lse.to(dtype),
            "the log-sum-exp over both key sets",
            mistakes={k: v.to(dtype) for k, v in lse_mistakes.items()} if not empty else None,
            nan_means=nan,
            atol=1e-3 if dtype == torch.float32 else 1e-9,
        )


def _mistakes(out_a, lse_a, out_b, lse_b) -> dict[str, torch.Tensor]:
    wa, wb = torch.sigmoid(lse_a - lse_b), torch.sigmoid(lse_b - lse_a)
    return {
        "average the two outputs: weigh each by its share of the softmax's denominator": (out_a + out_b) / 2,
        "add the two outputs: each is already normalised over its own keys, so weigh them": out_a + out_b,
        "swap the weights: out_a is weighed by exp(lse_a - lse), its own share": out_a * wb[..., None]
        + out_b * wa[..., None],
    }
