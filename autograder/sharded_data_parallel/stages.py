"""Check of notebook 07's first exercise: the bytes each device holds for the parameters,
gradients and optimizer state of mixed-precision training, at each ZeRO stage, with AdamW, SGD
with momentum or plain SGD."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ..checks import expect_close, fail, plain_number

# -- exercise: memory per device ----------------------------------------------------------------


# Bytes a parameter of optimizer state (K, in the ZeRO paper) in mixed precision: the fp32 master
# copy every optimizer updates, and the fp32 running statistics each keeps.
OPTIMIZER_STATE_BYTES = {"adamw": 4 + 4 + 4, "sgd_momentum": 4 + 4, "sgd": 4}


def zero_memory_reference(psi: float, n: int, stage: int, optimizer: str = "adamw") -> float:
    """Bytes per device of mixed-precision training's parameters, gradients and optimizer state
    (for the checks; never shown to students)."""
    return _zero_memory(psi, n, stage, OPTIMIZER_STATE_BYTES[optimizer])


def _zero_memory(psi: float, n: int, stage: int, k: float) -> float:
    """Bytes per device with bf16 parameters and gradients and ``k`` bytes a parameter of state."""
    return (
        2.0 * psi / (n if stage >= 3 else 1)
        + 2.0 * psi / (n if stage >= 2 else 1)
        + k * psi / (n if stage >= 1 else 1)
    )


def _rounded_zero_memory(psi: float, n: int, stage: int, k: float, rounding: Callable) -> float:
    """As `_zero_memory`, each sharded part rounded to whole bytes by ``rounding``."""
    return (
        (rounding(2 * psi / n) if stage >= 3 else 2 * psi)
        + (rounding(2 * psi / n) if stage >= 2 else 2 * psi)
        + (rounding(k * psi / n) if stage >= 1 else k * psi)
    )


def _zero_memory_mistakes(psi: float, n: int, stage: int, optimizer: str) -> dict[str, float]:
    """What the typical mistakes give for one case, each with what it did wrong."""
    k = OPTIMIZER_STATE_BYTES[optimizer]
    # In order: where two mistakes give the same number, the first is named.
    mistakes = {}
    if stage >= 1:
        mistakes[
            "round the shards down to whole bytes (floor division, //): shards are exact fractions here"
        ] = _rounded_zero_memory(psi, n, stage, k, math.floor)
        mistakes["round the shards up to whole bytes: shards are exact fractions here, with no padding"] = (
            _rounded_zero_memory(psi, n, stage, k, math.ceil)
        )
    if stage == 1:
        mistakes[
            "shard the 16-bit parameters already in stage 1 (stage 1 shards only the optimizer state)"
        ] = 2 * psi / n + 2 * psi + k * psi / n
    if stage + 1 <= 3:
        ahead = (
            "shard the gradients already in stage 1 (that is stage 2)"
            if stage == 1
            else f"give stage {stage} what stage {stage + 1} keeps"
        )
        mistakes[ahead] = zero_memory_reference(psi, n, stage + 1, optimizer)
    if stage >= 1:
        behind = (
            "count the stages one too late (stage 1 sharding nothing)"
            if stage == 1
            else f"give stage {stage} what stage {stage - 1} keeps"
        )
        mistakes[behind] = zero_memory_reference(psi, n, stage - 1, optimizer)
    if optimizer == "adamw":
        mistakes["count 16 bytes of optimizer state per parameter (K=16) instead of 12"] = _zero_memory(
            psi, n, stage, 16
        )
        mistakes["forget the fp32 master copy of the parameters (8 bytes of AdamW state, not 12)"] = (
            _zero_memory(psi, n, stage, 8)
        )
    else:
        mistakes[
            f"count AdamW's 12 bytes a parameter of optimizer state for {optimizer!r}, which keeps less"
        ] = _zero_memory(psi, n, stage, 12)
        mistakes[
            f"forget the fp32 master copy of the parameters: {optimizer!r} in mixed precision still "
            "updates an fp32 copy, or small updates are lost in bf16"
        ] = _zero_memory(psi, n, stage, k - 4)
        if optimizer == "sgd_momentum":
            mistakes["keep the momentum in bf16: it accumulates small updates, as the master copy does"] = (
                _zero_memory(psi, n, stage, 4 + 2)
            )
    return mistakes


def _expect_zero_memory(answer: Any, expected: float, what: str, mistakes: dict[str, float]) -> None:
    """As `expect_close`, but a wrong answer is told only that it is wrong and which mistake it
    looks like, never the expected number: one case's bytes would give away K."""
    __tracebackhide__ = True
    number = plain_number(answer)
    if number is None or not math.isfinite(number):
        fail(f"{what}: expected a number of bytes (a float), got {answer!r} ({type(answer).__name__}).")
    if math.isclose(number, expected, rel_tol=1e-6, abs_tol=1e-12):
        return
    message = f"{what} = {number:.6g} is not what each device holds."
    for mistake, value in mistakes.items():
        if math.isclose(number, value, rel_tol=1e-6, abs_tol=1e-12):
            fail(f"{message} That is what you get if you {mistake}.")
    fail(
        f"{message} Count the bytes a parameter of each of the three (parameters, gradients, "
        "optimizer state), in the precision each is kept, and which of them the stage shards."
    )


def check_zero_memory(
    zero_memory: Callable,
    cases: Sequence[tuple[float, int, int] | tuple[float, int, int, str]],
    *,
    show_expected: bool = False,
) -> None:
    """Check ``zero_memory(psi, n, stage, optimizer)`` on each case, naming the typical mistakes
    (a case of three calls it without ``optimizer``, which is AdamW), and that a stage other than
    0-3, fewer than one device, or an optimizer it does not know is refused with a ValueError.
    A wrong answer is told the expected number only with ``show_expected`` (the hidden tests)."""
    __tracebackhide__ = True
    for psi, n, stage, *rest in cases:
        optimizer = rest[0] if rest else "adamw"
        what = f"zero_memory(psi={psi:g}, n={n}, stage={stage}" + (
            f", optimizer={optimizer!r})" if rest else ")"
        )
        try:
            answer = zero_memory(psi, n, stage, *rest)
        except TypeError as err:
            if rest and "argument" in str(err):
                fail(
                    f"{what} raised TypeError: {err}. zero_memory takes the optimizer as its fourth argument."
                )
            raise
        expected = zero_memory_reference(psi, n, stage, optimizer)
        mistakes = _zero_memory_mistakes(psi, n, stage, optimizer)
        if show_expected:
            expect_close(answer, expected, what, rel=1e-6, mistakes=mistakes)
        else:
            _expect_zero_memory(answer, expected, what, mistakes)
    refused = {
        (1e9, 8, 4): "there is no stage 4",
        (1e9, 8, -1): "there is no stage -1",
        (1e9, 0, 1): "no devices hold nothing",
        (1e9, -8, 1): "a negative number of devices is no number of devices",
        (1e9, -1, 3): "a negative number of devices is no number of devices",
        (1e9, 8, 3, "lion"): "the optimizer 'lion' is none of 'adamw', 'sgd_momentum' and 'sgd'",
        (1e9, 8, 0, "adam"): "the optimizer 'adam' is none of 'adamw', 'sgd_momentum' and 'sgd'",
    }
    for bad, why in refused.items():
        try:
            zero_memory(*bad)
        except ValueError:
            continue
        except Exception as err:  # noqa: BLE001 - any other error is the wrong kind
            fail(f"zero_memory{bad} raised {type(err).__name__}: {err}; expected a ValueError ({why}).")
        fail(f"zero_memory{bad} returned without complaint; expected a ValueError: {why}.")
