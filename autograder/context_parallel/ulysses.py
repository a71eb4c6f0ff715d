"""Exercise 5's checks: DeepSpeed-Ulysses (all_to_all from sequence-sharded to head-sharded and
back) on ranks, and the choice among the ring, the all-gather and Ulysses by bytes and memory."""

from __future__ import annotations

from collections.abc import Callable

from ..checks import expect_equal, expect_floats, fail, run_ranks
from . import recording
from .data import describe, layout_of, rank_inputs, whole_inputs, with_seeds
from .layouts import attention, take

ALL_TO_ALL = ("alltoall", "all_to_all")


def ulysses_cases(hidden: bool) -> list[dict]:
    base = {"dim": 4, "scale": 1.0}
    if not hidden:
        return [{**base, "world_size": 2, "seq": 8, "heads": 4, "causal": True}]
    return [
        {**base, "world_size": 1, "seq": 5, "heads": 2, "causal": True},
        {**base, "world_size": 3, "seq": 11, "heads": 6, "causal": True},
        {**base, "world_size": 3, "seq": 9, "heads": 3, "causal": False},
        {**base, "world_size": 4, "seq": 10, "heads": 8, "causal": True},
        {**base, "world_size": 2, "seq": 7, "heads": 2, "causal": False},
    ]


def _on_rank(rank: int, world_size: int, fn: Callable, cases: list[dict], divisibility: bool) -> list:
    results = []
    for case in cases:
        q, k, v = rank_inputs(case, rank)
        with recording.RankRecord() as record:
            result = fn(rank, world_size, q, k, v, layout_of(case), case["causal"])
        results.append((result, record.summary()["events"]))
    if divisibility:  # heads that do not divide over the ranks: a ValueError, before any collective
        q = k = v = rank_inputs({**cases[0], "heads": world_size + 1}, rank)[0]
        try:
            fn(rank, world_size, q, k, v, layout_of(cases[0]), False)
        except ValueError:
            results.append("ValueError")
        except Exception as err:  # noqa: BLE001 - reported to the student
            results.append(type(err).__name__)
        else:
            results.append(None)
    return results


def check_ulysses(fn: Callable, cases: list[dict], divisibility: bool = False) -> None:
    """``fn(rank, world_size, q, k, v, layout, causal)`` returns this rank's rows of attention's output."""
    __tracebackhide__ = True
    cases = with_seeds(cases)
    for world_size in sorted({c["world_size"] for c in cases}):
        mine = [c for c in cases if c["world_size"] == world_size]
        raises = divisibility and world_size > 1
        found = run_ranks(_on_rank, world_size, fn, mine, raises, what="ulysses_attention", timeout=30)
        for index, case in enumerate(mine):
            _check_case(case, [found[rank][index] for rank in range(world_size)])
        if raises:
            raised = found[0][-1]
            if raised != "ValueError":
                fail(
                    f"ulysses_attention with {world_size + 1} heads on {world_size} ranks "
                    f"{'returned' if raised is None else 'raised ' + raised}: heads that do not divide "
                    "over the ranks cannot be shared out by all_to_all; raise a ValueError that says so."
                )


def _check_case(case: dict, per_rank: list) -> None:
    __tracebackhide__ = True
    layout, ws, heads, seq = layout_of(case), case["world_size"], case["heads"], case["seq"]
    q, k, v = whole_inputs(case)
    out, _ = attention(q, k, v, case["causal"])
    where = describe(case)
    for rank, (result, events) in enumerate(per_rank):
        at = f"ulysses_attention ({where}), rank {rank}"
        called = recording.collectives(events)
        wrong = [name for name in called if not any(w in name for w in ALL_TO_ALL)]
        if wrong:
            fail(f"{at} called {wrong[0]}: Ulysses moves data with all_to_all only, in and back.")
        if recording.messages(events, "send") or recording.messages(events, "recv"):
            fail(f"{at} sent or received point to point: Ulysses uses all_to_all only.")
        if ws > 1 and not called:
            fail(
                f"{at} called no all_to_all: each rank trades its rows of the other heads for its "
                "own heads' rows."
            )
        allowed = 4 * (heads // ws) * seq * seq * case["dim"]
        done = recording.matmul_flops(events)
        if done > allowed * (1 + 1e-9):
            fail(
                f"{at} ran {done} FLOPs of matmuls; attention of its {heads // ws} heads over the whole "
                f"sequence needs at most {allowed}: each rank computes only its own heads."
            )
        spans = layout[rank]
        expect_floats(
            f"{at}, out",
            result,
            take(out, spans),
            "attention over the whole sequence",
            mistakes={
                "ignore the causal mask" if case["causal"] else "apply a causal mask not asked for": take(
                    attention(q, k, v, not case["causal"])[0], spans
                )
            },
            atol=1e-8,
        )


# --- the choice ---------------------------------------------------------------------------------


def cp_costs(
    variant: str, seq: int, heads: int, kv_heads: int, head_dim: int, cp: int, divisible: bool = True
) -> dict:
    """Per GPU and layer, forward, in bf16 (2 bytes a value): ``bytes`` sent, and ``kv_bytes``, the K
    and V a GPU holds at once for attention (None where the variant cannot run)."""
    block = seq // cp * kv_heads * head_dim * 2 * 2  # one rank's K and V
    if variant == "ring":
        return {"bytes": (cp - 1) * block, "kv_bytes": 2 * block}
    if variant == "all_gather":
        return {"bytes": (cp - 1) * block, "kv_bytes": cp * block}
    if divisible and (heads % cp or kv_heads % cp):
        return {"bytes": None, "kv_bytes": None}
    sent = (cp - 1) / cp * seq / cp * (2 * heads + 2 * kv_heads) * head_dim * 2
    return {"bytes": sent, "kv_bytes": seq * kv_heads / cp * head_dim * 2 * 2}


PREFERENCE = ("all_gather", "ring", "ulysses")


def reference_choice(
    seq: int, heads: int, kv_heads: int, head_dim: int, cp: int, memory_budget: float, divisible: bool = True
):
    options = []
    for rank_of, variant in enumerate(PREFERENCE):
        costs = cp_costs(variant, seq, heads, kv_heads, head_dim, cp, divisible)
        if costs["bytes"] is not None and costs["kv_bytes"] <= memory_budget:
            options.append((costs["bytes"], rank_of, variant))
    return min(options)[2] if options else None


def choice_cases(hidden: bool) -> list[tuple]:
    """(seq, heads, kv_heads, head_dim, cp, memory_budget), per GPU (heads already split by TP)."""
    visible = [(131072, 16, 1, 128, 16, 1e9), (32768, 32, 32, 128, 8, 1e9)]
    if not hidden:
        return visible
    return visible + [
        (131072, 32, 32, 128, 8, 1e9),  # MHA: Ulysses sends least
        (131072, 32, 8, 128, 8, 1e9),  # GQA, kv divides: Ulysses still less
        (131072, 64, 8, 128, 16, 1e9),  # kv does not divide: the all-gather
        (1048576, 16, 1, 128, 16, 1e8),  # the gathered K/V do not fit: the ring
        (1048576, 16, 2, 128, 16, 2e8),  # nothing fits but the ring
        (1048576, 16, 2, 128, 16, 1e6),  # nothing fits
        (65536, 32, 16, 128, 4, 5e8),  # GQA, 16 kv heads over 4: Ulysses
        (65536, 12, 4, 64, 2, 1e9),  # cp 2: the all-gather ties the ring and sends less than Ulysses
        (131072, 40, 8, 128, 8, 1e8),  # only Ulysses fits
        (131072, 8, 8, 128, 16, 1e9),  # heads do not divide over cp 16: the all-gather
    ]


def check_cp_choice(choose: Callable, hidden: bool = False) -> None:
    __tracebackhide__ = True
    for case in choice_cases(hidden):
        expected = reference_choice(*case)
        seq, heads, kv, dim, cp, budget = case
        what = (
            f"choose_cp(seq={seq}, heads={heads}, kv_heads={kv}, head_dim={dim}, cp={cp}, "
            f"memory_budget={budget:g})"
        )
        mistakes = {}
        fits_ignored = min(
            (cp_costs(v, *case[:5])["bytes"], i, v)
            for i, v in enumerate(PREFERENCE)
            if cp_costs(v, *case[:5])["bytes"] is not None
        )[2]
        mistakes["leave memory out: the gathered K and V must fit memory_budget"] = fits_ignored
        mistakes["let Ulysses share out heads that do not divide by cp"] = reference_choice(
            *case, divisible=False
        )
        if expected is not None:
            mistakes["prefer the ring on a tie: Llama 3 took the all-gather for the same bytes"] = (
                "ring" if expected == "all_gather" else expected
            )
        mistakes.pop(next((m for m, v in mistakes.items() if v == expected), ""), None)
        expect_equal(choose(*case), expected, what, mistakes=mistakes)
