"""Notebook 09's exercise 3: the backward of an expert-parallel layer.

`check_exchange_grad` runs the student's differentiable exchange alone: rows of random sizes to
each rank, a loss that weighs each received row differently, and every rank's input gradient
against the one the reverse all_to_all gives. `check_ep_backward` runs the student's layer of
exercise 2 with that exchange: the gradients of the tokens, the router, every expert (on its
owner) and the shared expert equal to one process's.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist

from ..checks import counted, expect_floats, fail, private_generator, run_ranks
from .dispatch import HIDDEN, SHOWN, run_case
from .model import DIM, owned_experts
from .recording import waited

DIAGNOSES = {
    "Split sizes doesn't match": "The backward's split sizes do not fit the gradient's rows: the backward "
    "of an all_to_all is the reverse all_to_all, with the input and output splits swapped.",
    "received a message of": "The backward sent a gradient of a different size than its receiver expected: "
    "the backward of an all_to_all is the reverse all_to_all, the gradient of what this rank received going "
    "back to where it came from, with the input and output splits swapped.",
    "invalid gradient": "The backward returned a gradient of another shape than the forward's input: the "
    "gradient of the input comes back by the reverse all_to_all (the splits swapped).",
    "incorrect number of gradients": "backward must return one gradient for each argument of forward: None "
    "for the splits (and any other argument that is not a differentiable tensor).",
    "deadlocked": "The ranks did not make the same collectives in backward: every rank must run the reverse "
    "all_to_all, even one that received nothing.",
}


def _unit_rank(rank: int, world_size: int, fn: Callable) -> dict:
    generator = private_generator()
    input_splits = torch.randint(0, 4, (world_size,), generator=generator)
    output_splits = torch.empty_like(input_splits)
    dist.all_to_all_single(output_splits, input_splits)
    x = torch.randn(int(input_splits.sum()), DIM, generator=generator, requires_grad=True)
    y = waited(fn(x, output_splits.tolist(), input_splits.tolist()))
    if type(y) is not torch.Tensor or y.shape != (int(output_splits.sum()), DIM):
        return {"error": f"returned {tuple(y.shape) if isinstance(y, torch.Tensor) else repr(y)[:80]}"}
    if not y.requires_grad:
        return {"error": "no_grad"}
    w = torch.randn(y.shape, generator=generator)
    (y * w).sum().backward()
    return {"x": x.detach(), "in": input_splits.tolist(), "y": y.detach(), "w": w, "grad": x.grad}


def check_exchange_grad(fn: Callable, world_sizes: tuple[int, ...] = (2, 3)) -> None:
    """``fn(tensor, output_splits, input_splits)``: the rows exchanged as all_to_all_single does, and
    the gradient of the input equal to the reverse exchange of the output's gradient."""
    __tracebackhide__ = True
    for ws in world_sizes:
        name = f"{getattr(fn, '__name__', 'exchange')} with uneven splits"
        what = f"{name} on {counted(ws, 'rank')}"
        results = run_ranks(_unit_rank, ws, fn, what=name, diagnoses=DIAGNOSES, timeout=30)
        for rank, r in enumerate(results):
            if "error" in r and r["error"] == "no_grad":
                fail(
                    f"{what}: rank {rank}'s received rows do not require a gradient: dist.all_to_all_single "
                    "writes into a tensor autograd knows nothing of. Wrap it in a torch.autograd.Function "
                    "(or use torch's autograd all_to_all)."
                )
            if "error" in r:
                fail(f"{what}: rank {rank} {r['error']}; expected the rows it receives, of width {DIM}.")
        offsets = [[sum(r["in"][:d]) for d in range(ws)] for r in results]
        for rank, r in enumerate(results):
            pieces = [
                s["x"][offsets[src][rank] : offsets[src][rank] + s["in"][rank]]
                for src, s in enumerate(results)
            ]
            expect_floats(
                f"{what}: rank {rank}'s received rows", r["y"], torch.cat(pieces), "all_to_all_single"
            )
        for rank, r in enumerate(results):
            expected = torch.zeros_like(r["x"])
            for dest, d in enumerate(results):
                start = sum(s["in"][dest] for s in results[:rank])  # where rank's rows sit in dest's output
                expected[offsets[rank][dest] : offsets[rank][dest] + r["in"][dest]] = d["w"][
                    start : start + r["in"][dest]
                ]
            if r["grad"] is None:
                fail(f"{what}: rank {rank}'s input got no gradient: the exchange's backward must return it.")
            expect_floats(
                f"{what}: rank {rank}'s input gradient",
                r["grad"],
                expected,
                "the reverse all_to_all of the output's gradient (each row's gradient comes back from "
                "the rank it was sent to)",
            )


def check_ep_backward(forward: Callable, exchange: Callable, hidden: bool = False) -> None:
    """``forward(rank, world_size, moe, x, exchange)`` (exercise 2's layer) run with the student's
    differentiable ``exchange``: the gradient of every rank's tokens, of the router (summed over the
    ranks), of each expert on its owner, and of the shared expert (summed) equal to one process's."""
    __tracebackhide__ = True
    name = f"{getattr(forward, '__name__', 'the layer')} with {getattr(exchange, '__name__', 'the exchange')}"
    for case in HIDDEN if hidden else SHOWN:
        what, routing, results = run_case(forward, case, exchange, backward=True, name=name)
        x = routing.x.clone().requires_grad_()
        moe = routing.moe
        g = (
            torch.cat([r["g"] for r in results if r["g"] is not None])
            if all(r["g"] is not None for r in results)
            else None
        )
        if g is None:
            fail(
                f"{what}: the output does not require a gradient: the tokens' results came back through "
                "something autograd cannot see; use the differentiable exchange for every move of tokens."
            )
        moe.zero_grad()
        (moe(x) * g).sum().backward()
        for rank, r in enumerate(results):
            grads = r["grads"]
            if grads["x"] is None:
                fail(f"{what}: rank {rank}'s tokens got no gradient.")
            expect_floats(
                f"{what}: rank {rank}'s tokens' gradient",
                grads["x"],
                routing.mine(rank, x.grad),
                "one process's (the gradients through the experts come back to the tokens' ranks by the "
                "reverse all_to_all)",
            )
        gate = [r["grads"]["gate"] for r in results]
        if any(t is None for t in gate):
            fail(f"{what}: the router's weight got no gradient on some rank.")
        expect_floats(
            f"{what}: the router's gradient, summed over the ranks",
            torch.stack(gate).sum(0),
            moe.router.gate.weight.grad,
            "one process's",
        )
        E, ws = case["experts"], len(results)
        for e, expert in enumerate(moe.experts):
            o = routing.owner_of[e]
            got = results[o]["grads"]["experts"][e]
            for i, p in enumerate(expert.parameters()):
                reference = p.grad if p.grad is not None else torch.zeros_like(p)
                value = got[i] if got[i] is not None else torch.zeros_like(p)
                if got[i] is None and reference.abs().max() > 0:
                    fail(
                        f"{what}: expert {e}'s parameters got no gradient on rank {o}, which owns it: the "
                        "gradient of the expert's output must reach it from the tokens' ranks, through the "
                        "exchange's backward."
                    )
                expect_floats(f"{what}: expert {e}'s gradient on rank {o}", value, reference, "one process's")
            for rank in range(ws):
                if rank != o and e not in owned_experts(rank, ws, E):
                    stray = results[rank]["grads"]["experts"][e]
                    if any(t is not None and t.abs().max() > 0 for t in stray):
                        fail(f"{what}: rank {rank} has a gradient for expert {e}, which it does not own.")
        if moe.shared is not None:
            for i, p in enumerate(moe.shared.parameters()):
                total = sum(
                    (r["grads"]["shared"][i] for r in results if r["grads"]["shared"][i] is not None),
                    torch.zeros_like(p),
                )
                expect_floats(
                    f"{what}: the shared expert's gradient, summed over the ranks",
                    total,
                    p.grad,
                    "one process's",
                )
