"""Exercises 2 and 4's checks: ring attention on ranks, forward and backward, against attention of
the whole sequence in one process; and what each rank did: messages only around the ring, never
the whole K or V in one matmul, each block computed while the next one travels, and the blocks a
causal mask hides skipped."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..checks import expect_floats, fail, run_ranks
from . import recording
from .data import describe, layout_of, rank_inputs, whole_inputs, with_seeds
from .layouts import attention, block_flops, take

DEADLOCK = {
    "deadlocked": "The ring deadlocked: every rank waits in a blocking send or receive that another "
    "rank's order never matches. Post the sends and receives of a step with isend and irecv (or "
    "batch_isend_irecv) and only then wait on them, and check that each rank receives from the rank "
    "that sends to it (at 2 ranks, the next and the previous rank are the same rank; at 3 they are not).",
    "look stuck": "The ring deadlocked, or waits for a message never sent: post the sends and receives "
    "of a step with isend and irecv (or batch_isend_irecv), then wait on them, and check that each rank "
    "receives from the rank that sends to it (at 2 ranks, the next and the previous rank are the same "
    "rank; at 3 they are not).",
    "Pair is not connected": "A rank sent to itself: with one rank there is no one to send to, and "
    "the ring has nothing to do.",
}


def ring_cases(hidden: bool, backward: bool = False) -> list[dict]:
    base = {"heads": 2, "dim": 4, "scale": 1.0}
    if not hidden:
        return [
            {**base, "world_size": 2, "seq": 8, "causal": False},
            {**base, "world_size": 2, "seq": 8, "causal": True},
        ]
    cases = [
        {**base, "world_size": 1, "seq": 6, "causal": True},
        {**base, "world_size": 3, "seq": 9, "causal": False},
        {**base, "world_size": 3, "seq": 11, "causal": True},
        {**base, "world_size": 3, "seq": 12, "causal": True, "layout": "zigzag"},
        {**base, "world_size": 4, "seq": 10, "causal": True},
        {**base, "world_size": 4, "seq": 19, "causal": True, "layout": "zigzag"},
        {**base, "world_size": 4, "seq": 13, "causal": False, "heads": 3, "dim": 2},
        {**base, "world_size": 2, "seq": 7, "causal": True, "scale": 1500.0},
        {**base, "world_size": 2, "seq": 9, "causal": True, "layout": "zigzag"},
    ]
    if backward:
        cases = [c for c in cases if c["scale"] == 1.0]
    return cases


def _forward_on_rank(rank: int, world_size: int, fn: Callable, cases: list[dict]) -> list:
    results = []
    for case in cases:
        q, k, v = rank_inputs(case, rank)
        with recording.RankRecord() as record:
            result = fn(rank, world_size, q, k, v, layout_of(case), case["causal"])
        results.append((result, record.summary()["events"]))
    return results


def _run(fn: Callable, cases: list[dict], on_rank: Callable, what: str) -> dict[int, list]:
    """Each world size's cases in one launch; the results by world size, in the cases' order."""
    found = {}
    for world_size in sorted({c["world_size"] for c in cases}):
        mine = [c for c in cases if c["world_size"] == world_size]
        found[world_size] = run_ranks(
            on_rank, world_size, fn, mine, what=what, diagnoses=DEADLOCK, timeout=15
        )
    return found


def check_ring_attention(fn: Callable, cases: list[dict]) -> None:
    """``fn(rank, world_size, q, k, v, layout, causal)`` returns this rank's (out, lse)."""
    __tracebackhide__ = True
    cases = with_seeds(cases)
    found = _run(fn, cases, _forward_on_rank, "ring_attention")
    counters = {ws: 0 for ws in found}
    for case in cases:
        ws = case["world_size"]
        per_rank = [found[ws][rank][counters[ws]] for rank in range(ws)]
        counters[ws] += 1
        _check_forward_case(case, per_rank)


def _check_forward_case(case: dict, per_rank: list) -> None:
    __tracebackhide__ = True
    layout, causal = layout_of(case), case["causal"]
    q, k, v = whole_inputs(case)
    out, lse = attention(q, k, v, causal)
    other_out, other_lse = attention(q, k, v, not causal)
    where = describe(case)
    for rank, (result, events) in enumerate(per_rank):
        spans, at = layout[rank], f"ring_attention ({where}), rank {rank}"
        if not isinstance(result, tuple) or len(result) != 2:
            fail(f"{at}: expected a tuple (out, lse), got {type(result).__name__}.")
        _check_conduct(at, events, case, rank)
        own = [take(t, spans) for t in (q, k, v)]
        own_out, own_lse = attention(*own, causal)
        masking = "ignore the causal mask" if causal else "apply a causal mask not asked for"
        mistakes = {
            masking: take(other_out, spans),
            "attend only to this rank's own keys: merge in every block that comes round": own_out,
        }
        nan = (
            "Scores this large overflow exp: keep a running maximum (or the log-sum-exp) and exponentiate "
            "only differences from it, rescaling what was accumulated when it grows."
        )
        expect_floats(f"{at}, out", result[0], take(out, spans), "attention over the whole sequence",
                      mistakes=mistakes, nan_means=nan, atol=1e-8)  # fmt: skip
        expect_floats(f"{at}, lse", result[1], take(lse[..., None], spans)[..., 0],
                      "the log-sum-exp over the whole sequence's visible keys",
                      mistakes={"ignore the causal mask" if causal else "apply a causal mask not asked for":
                                take(other_lse[..., None], spans)[..., 0],
                                "return only this rank's own block's log-sum-exp": own_lse},
                      nan_means=nan, atol=1e-8)  # fmt: skip
        _check_skipping(at, events, case, rank)


def _check_conduct(at: str, events: list, case: dict, rank: int) -> None:
    """Only messages, only to the ring's neighbours, no matmul wider than one rank's rows, and a
    receive in flight while each block but the last is computed."""
    __tracebackhide__ = True
    ws, layout = case["world_size"], layout_of(case)
    called = recording.collectives(events)
    if called:
        fail(
            f"{at} called {called[0]}: a ring passes K and V from rank to rank with isend and irecv "
            "only, so that no rank ever holds them all (Llama 3's all-gather variant comes later)."
        )
    if ws == 1:
        return
    local = max(sum(b - a for a, b in spans) for spans in layout)
    widest = recording.widest(recording_events := events)
    if widest > max(local, case["dim"]):
        fail(
            f"{at} ran a matmul {widest} rows wide, more than any rank holds ({local}): it gathered "
            "K or V of several ranks into one tensor. Compute each block as it arrives, merge it into "
            "the running output, and let it go: no rank may ever hold the whole sequence's K or V."
        )
    sends, recvs = recording.messages(recording_events, "send"), recording.messages(recording_events, "recv")
    nxt, prev = (rank + 1) % ws, (rank - 1) % ws
    for forward in (True, False):
        to, frm = (nxt, prev) if forward else (prev, nxt)
        if sends and recvs and all(p == to for p, _ in sends) and all(p == frm for p, _ in recvs):
            break
    else:
        fail(
            f"{at} sent to ranks {sorted({p for p, _ in sends})} and received from "
            f"{sorted({p for p, _ in recvs})}: in a ring, each rank sends only to its next neighbour "
            f"(here {nxt}) and receives only from its previous one ({prev})."
        )
    heads, dim = case["heads"], case["dim"]
    needed = 2 * heads * dim * (sum(b - a for s in layout for a, b in s) - local)
    if sum(n for _, n in recvs) < needed:
        fail(
            f"{at} received {sum(n for _, n in recvs)} elements; the K and V blocks of the other ranks "
            f"hold at least {needed}: every block must come round the ring."
        )
    idle = recording.computed_with_nothing_in_flight(recording_events)
    if idle:
        fail(
            f"{at} ran {idle} matmul{'s' if idle != 1 else ''} while no receive was in flight, though "
            "blocks were still to come: the transfer did not overlap the compute. Post the next "
            "block's isend and irecv before computing the current block, and wait on them after."
        )


def _check_skipping(at: str, events: list, case: dict, rank: int) -> None:
    __tracebackhide__ = True
    layout = layout_of(case)
    allowed = block_flops(layout, rank, case["causal"], case["heads"], case["dim"])
    done = recording.matmul_flops(events)
    if done > allowed * (1 + 1e-9):
        fail(
            f"{at} ran {done} FLOPs of matmuls where the (query span, key span) pairs the mask lets "
            f"through need {allowed}: it computed blocks above the diagonal. A span of keys that starts "
            "after a span of queries is entirely in their future: skip that pair (compute nothing), "
            "rather than computing it and masking it all."
        )


def _backward_on_rank(rank: int, world_size: int, fn: Callable, cases: list[dict], outs: list) -> list:
    results = []
    for case, (out, lse) in zip(cases, outs, strict=True):
        q, k, v, grad = rank_inputs(case, rank, count=4)
        with recording.RankRecord() as record:
            layout, causal = layout_of(case), case["causal"]
            result = fn(rank, world_size, q, k, v, out[rank], lse[rank], grad, layout, causal)
        results.append((result, record.summary()["events"]))
    return results


def check_ring_backward(fn: Callable, cases: list[dict]) -> None:
    """``fn(rank, world_size, q, k, v, out, lse, grad_out, layout, causal)`` returns this rank's
    (dq, dk, dv)."""
    __tracebackhide__ = True
    cases = with_seeds(cases)
    references = {}
    for index, case in enumerate(cases):
        references[index] = _reference_backward(case)
    found = {}
    for ws in sorted({c["world_size"] for c in cases}):
        mine = [i for i, c in enumerate(cases) if c["world_size"] == ws]
        outs = [references[i]["per_rank_out"] for i in mine]
        found[ws] = dict(
            zip(
                mine,
                zip(*run_ranks(_backward_on_rank, ws, fn, [cases[i] for i in mine], outs,
                               what="ring_attention_backward", diagnoses=DEADLOCK, timeout=15), strict=True),
                strict=True,
            )
        )  # fmt: skip
    for index, case in enumerate(cases):
        _check_backward_case(case, found[case["world_size"]][index], references[index])


def _reference_backward(case: dict) -> dict:
    layout, causal = layout_of(case), case["causal"]
    q, k, v, grad = (t.requires_grad_() if i < 3 else t for i, t in enumerate(whole_inputs(case, count=4)))
    out, lse = attention(q, k, v, causal)
    dq, dk, dv = torch.autograd.grad(out, (q, k, v), grad)
    q, k, v, out, lse = q.detach(), k.detach(), v.detach(), out.detach(), lse.detach()
    per_rank_out = [
        [take(out, spans) for spans in layout],
        [take(lse[..., None], spans)[..., 0] for spans in layout],
    ]
    return {
        "grads": (dq, dk, dv),
        "mistakes": _backward_mistakes(q, k, v, grad, out, lse, causal, layout),
        "per_rank_out": per_rank_out,
    }


def _backward_mistakes(q, k, v, grad, out, lse, causal, layout) -> list[dict[str, torch.Tensor]]:
    """For dq, dk, dv: what typical wrong backwards give, on the whole sequence."""
    scale = q.shape[-1] ** -0.5
    n = q.shape[-2]
    scores = q @ k.transpose(-1, -2) * scale
    if causal:
        scores = scores.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    p = torch.exp(scores - lse[..., None])
    dp = grad @ v.transpose(-1, -2)
    ds_no_d = p * dp  # the softmax's gradient without rowsum(dO * O)
    # dK and dV from this rank's own queries only: what a rank keeps if it never sends them back
    owner = torch.empty(n, dtype=torch.long)
    for rank, spans in enumerate(layout):
        for a, b in spans:
            owner[a:b] = rank
    same = (owner[:, None] == owner[None, :]).to(p.dtype)
    ds = p * (dp - (grad * out).sum(-1, keepdim=True))
    own_dk = (ds * same).transpose(-1, -2) @ q * scale
    own_dv = (p * same).transpose(-1, -2) @ grad
    no_d = "leave out the softmax's rowsum(dO * O) term (D) from dS = P * (dP - D)"
    return [
        {no_d: ds_no_d @ k * scale, "forget the 1/sqrt(d) scale of the scores": ds @ k},
        {
            no_d: ds_no_d.transpose(-1, -2) @ q * scale,
            "keep only the gradient this rank's own queries give its keys: the other ranks' "
            "contributions must come back to the keys' owner": own_dk,
        },
        {
            "keep only the gradient this rank's own queries give its values: the other ranks' "
            "contributions must come back to the values' owner": own_dv,
        },
    ]


def _check_backward_case(case: dict, per_rank: list, reference: dict) -> None:
    __tracebackhide__ = True
    layout = layout_of(case)
    where = describe(case)
    for rank, (result, events) in enumerate(per_rank):
        at = f"ring_attention_backward ({where}), rank {rank}"
        if not isinstance(result, tuple) or len(result) != 3:
            fail(f"{at}: expected a tuple (dq, dk, dv), got {type(result).__name__}.")
        called = recording.collectives(events)
        if called:
            fail(f"{at} called {called[0]}: pass blocks around the ring with isend and irecv only.")
        local = max(sum(b - a for a, b in spans) for spans in layout)
        if case["world_size"] > 1 and recording.widest(events) > max(local, case["dim"]):
            fail(
                f"{at} ran a matmul {recording.widest(events)} rows wide, more than any rank holds "
                f"({local}): it gathered the K, V, Q or gradients of several ranks. Work block by block."
            )
        for name, got, full, mistakes in zip(("dq", "dk", "dv"), result, reference["grads"],
                                             reference["mistakes"], strict=True):  # fmt: skip
            spans = layout[rank]
            expect_floats(
                f"{at}, {name}",
                got,
                take(full, spans),
                "the gradient of attention over the whole sequence",
                mistakes={m: take(value, spans) for m, value in mistakes.items()},
                atol=1e-8,
            )
