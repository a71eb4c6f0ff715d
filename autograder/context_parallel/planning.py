"""Exercise 6's checks: context parallelism on 08's mesh ([TP, CP, PP, DP] from the innermost, as
Llama 3 orders it) and the bytes its all-gather sends, the term 08's planner builds on."""

from __future__ import annotations

import math
from collections.abc import Callable

from ..checks import expect_close, expect_equal
from ..combined_parallelism.layouts import GPT_13B, LLAMA_70B
from ..combined_parallelism.published import H100_CLUSTER, LLAMA3_405B, llama3_spec

ORDER = ("tp", "cp", "pp", "dp")  # innermost first


def reference_cp_group(rank: int, sizes: dict[str, int]) -> list[int]:
    stride = sizes["tp"]
    block = stride * sizes["cp"]
    base = rank - (rank // stride) % sizes["cp"] * stride
    assert base % stride == rank % stride and base // block == rank // block
    return [base + i * stride for i in range(sizes["cp"])]


def group_cases(hidden: bool) -> list[dict[str, int]]:
    visible = [{"tp": 2, "cp": 2, "pp": 2, "dp": 1}]
    if not hidden:
        return visible
    return visible + [
        {"dp": 2, "pp": 2, "cp": 3, "tp": 2},
        {"tp": 1, "cp": 4, "pp": 1, "dp": 1},
        {"tp": 8, "cp": 1, "pp": 2, "dp": 1},
        {"pp": 2, "dp": 2, "tp": 3, "cp": 2},
        {"tp": 8, "cp": 16, "pp": 16, "dp": 8},
    ]


def _group_mistakes(rank: int, sizes: dict[str, int]) -> dict[str, list[int]]:
    world = math.prod(sizes.values())
    found = {}
    for order, mistake in (
        (("cp", "tp", "pp", "dp"), "put CP inside TP: TP stays innermost, on NVLink; CP comes next"),
        (("tp", "pp", "cp", "dp"), "put CP outside PP: Llama 3's order is [TP, CP, PP, DP]"),
    ):
        stride = math.prod(sizes[a] for a in order[: order.index("cp")])
        coords = rank // stride % sizes["cp"]
        base = rank - coords * stride
        group = [base + i * stride for i in range(sizes["cp"])]
        if all(r < world for r in group):
            found[mistake] = group
    return found


def check_cp_group(cp_group: Callable, hidden: bool = False) -> None:
    __tracebackhide__ = True
    for sizes in group_cases(hidden):
        world = math.prod(sizes.values())
        for rank in range(0, world, max(1, world // 40)):
            got = cp_group(rank, dict(sizes))
            plain = [int(r) for r in got] if isinstance(got, (list, tuple)) else got
            expect_equal(
                plain,
                reference_cp_group(rank, sizes),
                f"cp_group({rank}, {sizes})",
                mistakes=_group_mistakes(rank, sizes),
            )


def reference_cp_bytes_per_layer(spec: dict) -> float:
    """Bytes one GPU sends over its CP group for one layer and one micro-batch, Llama 3's way: K and V
    of the whole sequence all_gathered forward (again under full recomputation), their gradients
    reduce_scattered backward; in each, a ring brings each rank the other (cp - 1)/cp."""
    cp = spec["cp"]
    kv_heads = max(spec["kv_heads"] // spec["tp"], 1)  # a TP rank's; replicated when tp > kv_heads
    head_dim = spec["hidden"] // spec["heads"]
    gathered = 2 * 2 * spec["seq"] * spec["micro_batch"] * kv_heads * head_dim  # K and V, bf16
    passes = 3 if spec["recompute"] == "full" else 2
    return passes * (cp - 1) / cp * gathered


def bytes_cases(hidden: bool) -> list[dict]:
    visible = [llama3_spec(8, 16, 16, 8, 131072)]
    if not hidden:
        return visible
    return visible + [
        {**llama3_spec(8, 4, 16, 32, 32768), "recompute": "full"},
        {**LLAMA_70B, **H100_CLUSTER, "seq": 65536, "dp": 4, "tp": 16, "pp": 1, "cp": 8, "zero": 1,
         "global_batch": 8, "micro_batch": 2, "recompute": "selective", "sequence_parallel": True,
         "virtual_stages": 1},
        {**GPT_13B, **H100_CLUSTER, "seq": 16384, "dp": 2, "tp": 4, "pp": 2, "cp": 2, "zero": 0,
         "global_batch": 8, "micro_batch": 1, "recompute": "none", "sequence_parallel": False,
         "virtual_stages": 1},
        {**LLAMA3_405B, **H100_CLUSTER, "seq": 131072, "dp": 1, "tp": 8, "pp": 16, "cp": 1, "zero": 3,
         "global_batch": 16, "micro_batch": 1, "recompute": "none", "sequence_parallel": True,
         "virtual_stages": 1},
    ]  # fmt: skip


def check_cp_bytes(cp_bytes_per_layer: Callable, hidden: bool = False) -> None:
    __tracebackhide__ = True
    for spec in bytes_cases(hidden):
        expected = reference_cp_bytes_per_layer(spec)
        cp, tp = spec["cp"], spec["tp"]
        what = (
            f"cp_bytes_per_layer(seq {spec['seq']}, micro_batch {spec['micro_batch']}, hidden "
            f"{spec['hidden']}, heads {spec['heads']}, kv_heads {spec['kv_heads']}, tp {tp}, cp {cp}, "
            f"recompute {spec['recompute']!r})"
        )
        got = cp_bytes_per_layer(dict(spec))
        if expected == 0:
            expect_close(got, 0.0, what + ": with cp 1 there is no one to gather from")
            continue
        ring = (cp - 1) / cp
        passes = 3 if spec["recompute"] == "full" else 2
        kv = max(spec["kv_heads"] // tp, 1)
        mistakes = {
            "gather every head's K and V, not only grouped-query attention's kv_heads": spec["heads"]
            / spec["kv_heads"],
            "count the K and V of all the TP ranks' heads: each TP rank gathers only its own": tp,
            "count the whole gathered K and V: a ring brings each rank only the (cp - 1)/cp it lacks": 1
            / ring,
            "count only the forward all_gather: backward reduce_scatters the gradients of K and V": 1
            / passes,
            "forget that full recomputation gathers K and V again in backward": 2 / passes,
            "count K only, or V only": 1 / 2,
            "divide the kv heads by TP without keeping at least one a rank": spec["kv_heads"] / tp / kv,
        }
        expect_close(got, expected, what, rel=1e-6, mistakes={m: f * expected for m, f in mistakes.items()})
