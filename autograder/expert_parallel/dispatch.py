"""Notebook 09's exercise 2: an expert-parallel MoE layer's forward on ranks (`check_ep_forward`).

Each rank draws its own tokens from a seed no other process knows, and returns them with its
output; the reference is one process running the same MoE on every rank's tokens together. What
each rank did is recorded as it happens: which expert computed on which rows (hooks on the
experts), every call of the ``exchange`` it was given (rows sent to and received from each rank),
and every collective (a dispatch mode). The checks name the mistake before they compare numbers:
an expert computed off its owner, a token gathered everywhere, equal splits, no count exchange,
a combine that puts results in the wrong place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

from ..checks import counted, expect_floats, fail, fresh_seed, private_generator, run_ranks
from .model import DIM, make_moe, make_tokens, owned_experts, owner
from .recording import CollectiveLog, Exchanges, expert_calls

# (world size, tokens on each rank, experts, top_k, score, normalise, shared, silent experts)
SHOWN = [
    {"tokens": [5, 3], "experts": 4, "top_k": 2, "score": "softmax", "normalise": True, "shared": True},
]
HIDDEN = [
    {"tokens": [4], "experts": 3, "top_k": 2, "score": "softmax", "normalise": True, "shared": True},
    {"tokens": [7, 2, 5], "experts": 6, "top_k": 2, "score": "softmax", "normalise": True, "shared": True,
     "silent": (4, 5)},
    {"tokens": [3, 6, 1, 4], "experts": 8, "top_k": 2, "score": "sigmoid", "normalise": False,
     "shared": False, "silent": (2,)},
    {"tokens": [5, 4, 6], "experts": 4, "top_k": 1, "score": "softmax", "normalise": True, "shared": True},
]  # fmt: skip

# A case's tokens are drawn again, up to this many times, while the ranks would send each other as
# many rows as they receive (`Routing.symmetric`).
DRAWS = 8

DIAGNOSES = {
    "received a message of": "A rank received a different number of rows than another sent it: each rank "
    "learns how many rows it will receive from each rank only from the counts the others send it, so "
    "exchange the counts first and use them as the output splits (the splits differ from rank to rank).",
    "Split sizes doesn't match": "The split sizes do not add up to the tensor's rows: the input splits are "
    "this rank's rows for each rank, the output splits what each rank sends it (the exchanged counts).",
    "deadlocked": "The ranks did not all make the same exchanges in the same order: every rank takes part "
    "in every exchange, even one in which it sends and receives nothing.",
}


def plain_exchange(tensor: torch.Tensor, output_splits: Any, input_splits: Any) -> torch.Tensor:
    """``all_to_all_single`` of rows: input_splits[j] rows to rank j, output_splits[i] from rank i."""
    out = tensor.new_empty((int(sum(output_splits)), *tensor.shape[1:]))
    dist.all_to_all_single(
        out, tensor.contiguous(), [int(n) for n in output_splits], [int(n) for n in input_splits]
    )
    return out


def make_case_moe(case: dict, seed: int) -> torch.nn.Module:
    return make_moe(
        seed,
        case["experts"],
        case["top_k"],
        case["score"],
        case["normalise"],
        case["shared"],
        tuple(case.get("silent", ())),
    )


def _rank(
    rank: int,
    world_size: int,
    fn: Callable,
    case: dict,
    seed: int,
    exchange: Callable,
    backward: bool,
) -> dict:
    generator = private_generator()
    x = make_tokens(case["tokens"][rank], generator)
    moe = make_case_moe(case, seed)
    records, handles = expert_calls(moe)
    recorder = Exchanges(exchange)
    if backward:
        x.requires_grad_()
    g, grads = None, None
    with CollectiveLog() as log:
        out = fn(rank, world_size, moe, x, recorder)
        forward_done = len(log.calls)
        if backward and type(out) is torch.Tensor and out.requires_grad and out.shape == x.shape:
            g = torch.randn(out.shape, generator=generator)
            (out * g).sum().backward()
            grads = {
                "x": x.grad,
                "gate": moe.router.gate.weight.grad,
                "experts": [[p.grad for p in e.parameters()] for e in moe.experts],
                "shared": [p.grad for p in moe.shared.parameters()] if moe.shared is not None else [],
            }
    for handle in handles:
        handle.remove()
    if isinstance(out, torch.Tensor):
        out = out.detach().clone()
    elif not isinstance(out, (int, float, str, type(None), list, tuple)):
        out = repr(out)[:200]
    return {
        "x": x.detach(),
        "out": out,
        "experts": [(seq, e, rows) for seq, e, rows in records if len(rows)],
        "exchanges": recorder.summary(),
        "collectives": log.summary()[:forward_done],
        "g": g,
        "grads": grads,
    }


def _rows(t: torch.Tensor) -> list:
    return sorted(map(tuple, t.tolist()))


class Routing:
    """What one process knows of a case: every token, where each goes, the reference output."""

    def __init__(self, case: dict, seed: int, xs: Sequence[torch.Tensor], backward: bool = False) -> None:
        self.case, self.world = case, len(xs)
        self.moe = make_case_moe(case, seed)
        self.x = torch.cat(list(xs))
        self.starts = [sum(len(x) for x in xs[:r]) for r in range(len(xs) + 1)]
        with torch.no_grad():
            self.experts, self.weights = self.moe.router(self.x)
            self.out = self.moe(self.x)
            self.shared = self.moe.shared(self.x) if self.moe.shared is not None else torch.zeros_like(self.x)
        E, ws = case["experts"], self.world
        self.owner_of = [owner(e, ws, E) for e in range(E)]
        dest = [[self.owner_of[int(e)] for e in row] for row in self.experts]
        self.source = [
            next(r for r in range(ws) if self.starts[r] <= t < self.starts[r + 1]) for t in range(len(self.x))
        ]
        self.sent = {"every": [0] * ws, "once": [0] * ws}  # rows each rank sends: a copy an expert, a rank
        self.received = {"every": [0] * ws, "once": [0] * ws}
        # [i][j]: the rows rank i sends rank j, counted both ways
        self.between = {"every": [[0] * ws for _ in range(ws)], "once": [[0] * ws for _ in range(ws)]}
        for t, ranks in enumerate(dest):
            for r in ranks:
                self.sent["every"][self.source[t]] += 1
                self.received["every"][r] += 1
                self.between["every"][self.source[t]][r] += 1
            for r in set(ranks):
                self.sent["once"][self.source[t]] += 1
                self.received["once"][r] += 1
                self.between["once"][self.source[t]][r] += 1

    def symmetric(self) -> bool:
        """Whether every rank happens to receive from each rank as many rows as it sends it (counted
        either way): a layer that skips exchanging the counts would then pass by chance."""
        return self.world > 1 and any(
            all(m[i][j] == m[j][i] for i in range(self.world) for j in range(i))
            for m in self.between.values()
        )

    def rows_of(self, expert: int) -> list:
        tokens = (self.experts == expert).any(-1).nonzero().flatten()
        return _rows(self.x[tokens])

    def mine(self, rank: int, t: torch.Tensor) -> torch.Tensor:
        return t[self.starts[rank] : self.starts[rank + 1]]


def _expect_expert_work(what: str, routing: Routing, results: list[dict]) -> None:
    __tracebackhide__ = True
    E, ws = routing.case["experts"], routing.world
    seen: dict[int, list] = {e: [] for e in range(E)}
    for rank, result in enumerate(results):
        for _, e, rows in result["experts"]:
            if e not in owned_experts(rank, ws, E):
                fail(
                    f"{what}: rank {rank} ran expert {e}, which rank {routing.owner_of[e]} owns: each rank "
                    f"computes only its own experts (rank {rank} owns {list(owned_experts(rank, ws, E))}), "
                    "on the tokens sent to it."
                )
            seen[e] += rows.tolist()
    for e in range(E):
        expected = routing.rows_of(e)
        got = sorted(map(tuple, seen[e]))
        if got == expected:
            continue
        if not got:
            fail(
                f"{what}: expert {e} (on rank {routing.owner_of[e]}) never computed on the "
                f"{counted(len(expected), 'token')} routed to it: call moe.experts[{e}] on the rows it "
                "received."
            )
        if len(got) == len(expected):
            fail(
                f"{what}: expert {e} computed on {counted(len(got), 'row')}, as many as are routed to it, "
                "but not the same rows: check which received rows belong to which expert (the counts say how "
                "many rows of each rank's chunk go to each of this rank's experts)."
            )
        fail(
            f"{what}: expert {e} computed on {counted(len(got), 'row')}; {counted(len(expected), 'token')} "
            "are routed to it: each expert computes on exactly its tokens, each once."
        )


def _expect_no_gathering(what: str, routing: Routing, results: list[dict]) -> None:
    __tracebackhide__ = True
    ws = routing.world
    for rank, result in enumerate(results):
        for _, name, numels, floating in result["collectives"]:
            if name != "all_to_all" and floating and max(numels, default=0) >= DIM:
                fail(
                    f"{what}: rank {rank} ran {'an' if name[0] in 'aeiou' else 'a'} {name} of "
                    f"{max(numels)} floating-point elements. Gathering every token on every rank sends "
                    f"each token to all {ws} ranks and makes every rank sort through all of them: send each "
                    "token only to the ranks of its experts, with the exchange (an all_to_all)."
                )


def _expect_exchanges(what: str, routing: Routing, results: list[dict]) -> None:
    __tracebackhide__ = True
    ws = routing.world
    for rank, result in enumerate(results):
        if ws == 1:
            continue
        floats = [c for c in result["exchanges"] if c[2] and c[1] == DIM]
        tokens_a2a = [c for c in result["collectives"] if c[1] == "all_to_all" and c[3]]
        if len(tokens_a2a) > len([c for c in result["exchanges"] if c[2]]):
            fail(
                f"{what}: rank {rank} moved floating-point rows with an all_to_all of its own: move the "
                "tokens with the `exchange` the layer is given (exercise 3 hands it another one)."
            )
        if not floats:
            fail(
                f"{what}: rank {rank} sent no tokens through `exchange`: the tokens must travel to their "
                "experts."
            )
        dispatch = floats[0]
        seq, _, _, input_splits, output_splits, received = dispatch
        earlier = [c for c in result["exchanges"] if c[0] < seq] + [
            c for c in result["collectives"] if c[0] < seq
        ]
        if not earlier:
            fail(
                f"{what}: rank {rank}'s first exchange already carried tokens: the count exchange was "
                "skipped. A rank cannot know how many rows each other rank will send it (their tokens, and "
                "so their routing, are theirs): exchange the counts first, then the tokens with those counts."
            )
        sent_ok = sum(input_splits) in (routing.sent["every"][rank], routing.sent["once"][rank])
        got_ok = received in (routing.received["every"][rank], routing.received["once"][rank])
        if len(input_splits) != ws or len(output_splits) != ws or not (sent_ok and got_ok):
            equal = len(set(input_splits)) == 1 and len(set(output_splits)) == 1
            fail(
                f"{what}: rank {rank}'s dispatch sent {sum(input_splits)} rows in splits {input_splits} and "
                f"received {received} in splits {output_splits}; its tokens make "
                f"{routing.sent['every'][rank]} (token, expert) pairs, and {routing.received['every'][rank]} "
                f"pairs are routed to its experts."
                + (
                    " Equal splits were assumed: the number of rows for each rank depends on the routing."
                    if equal
                    else " Send each token's row to the rank of each of its experts (or once to each rank), "
                    "and receive exactly what is routed here, no padding."
                )
            )
        combine = [c for c in floats[1:] if c[5] == sum(input_splits)]
        if not combine:
            fail(
                f"{what}: rank {rank} never received its tokens' results back: after the experts, the "
                "reverse exchange (the splits swapped) returns each result to its token's rank."
            )


def _expect_output(what: str, routing: Routing, results: list[dict]) -> None:
    __tracebackhide__ = True
    for rank, result in enumerate(results):
        out = result["out"]
        expected = routing.mine(rank, routing.out)
        unweighted = routing.shared.clone()
        for e, expert in enumerate(routing.moe.experts):
            token = (routing.experts == e).any(-1).nonzero().flatten()
            with torch.no_grad():
                unweighted[token] += expert(routing.x[token])
        mistakes = {
            "leave out the shared expert, which every token goes through on its own rank": routing.mine(
                rank, routing.out - routing.shared
            ),
            "add the experts' outputs without the router's weights": routing.mine(rank, unweighted),
        }
        expect_floats(
            f"{what}: rank {rank}'s output",
            out,
            expected,
            "one process running the MoE on every rank's tokens. The experts computed on the right tokens, "
            "so the mistake is in the combine: each result must come back to its token's rank, be "
            "multiplied by its weight and added to its own token's row, in the order the rows were sent",
            mistakes=mistakes,
            atol=1e-5,
        )


def _describe(case: dict) -> str:
    silent = f", experts {list(case['silent'])} never chosen" if case.get("silent") else ""
    return (
        f"{case['tokens']} tokens, {case['experts']} experts, top-{case['top_k']} {case['score']}"
        f"{'' if case['normalise'] else ' (not normalised)'}{', a shared expert' if case['shared'] else ''}"
        f"{silent}"
    )


def run_case(fn: Callable, case: dict, exchange: Callable, backward: bool, name: str) -> tuple:
    __tracebackhide__ = True
    ws = len(case["tokens"])
    what = f"{name} on {counted(ws, 'rank')} with {_describe(case)}"
    for _ in range(DRAWS):
        seed = fresh_seed()
        results = run_ranks(
            _rank,
            ws,
            fn,
            case,
            seed,
            exchange,
            backward,
            what=f"{name} (with {_describe(case)})",
            diagnoses=DIAGNOSES,
            timeout=30,
        )
        routing = Routing(case, seed, [r["x"] for r in results], backward)
        if not routing.symmetric():
            break  # (drawn again otherwise: two ranks' random tokens send each other as many rows often)
    for rank, result in enumerate(results):
        out = result["out"]
        if type(out) is not torch.Tensor or out.shape != result["x"].shape:
            shape = tuple(out.shape) if isinstance(out, torch.Tensor) else repr(out)[:80]
            fail(f"{what}: rank {rank} returned {shape}; return its tokens' outputs, of its input's shape.")
    _expect_no_gathering(what, routing, results)
    _expect_expert_work(what, routing, results)
    _expect_exchanges(what, routing, results)
    _expect_output(what, routing, results)
    return what, routing, results


def check_ep_forward(fn: Callable, hidden: bool = False) -> None:
    """``fn(rank, world_size, moe, x, exchange)``: this rank's tokens' outputs, equal to one process's,
    each expert computed on its owner only, on exactly its tokens, the tokens moved by ``exchange``
    with exchanged counts."""
    __tracebackhide__ = True
    for case in HIDDEN if hidden else SHOWN:
        run_case(fn, case, plain_exchange, backward=False, name=getattr(fn, "__name__", "the layer"))
