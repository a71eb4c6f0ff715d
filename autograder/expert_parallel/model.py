"""The mixture-of-experts layer of notebook 09, the same in every rank and in the checking process:
a router (softmax or sigmoid scores, top-k, weights normalised among the chosen or not), routed
experts that are small MLPs, and an optional shared expert that every token goes through.

``MoE.forward`` is one process running the whole layer on the whole batch: the reference an
expert-parallel layer must equal. Which rank owns which expert is `owned_experts`.
"""

from __future__ import annotations

import torch
from torch import nn

DIM, FFN = 16, 12  # a token's width and an expert's intermediate width


class Expert(nn.Module):
    """A small MLP: up to FFN, GELU, back down to DIM."""

    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(DIM, FFN)
        self.down = nn.Linear(FFN, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.gelu(self.up(x)))


class Router(nn.Module):
    """Scores every expert for every token and picks each token's ``top_k``.

    ``router(x)`` returns ``(experts, weights)``, both of shape (tokens, top_k): each token's
    experts in order of decreasing score (ties to the lower-numbered expert) and the weight its
    output gets in the token's sum."""

    def __init__(self, experts: int, top_k: int, score: str = "softmax", normalise: bool = True) -> None:
        super().__init__()
        if score not in ("softmax", "sigmoid"):
            raise ValueError(f"score is 'softmax' or 'sigmoid', not {score!r}")
        self.gate = nn.Linear(DIM, experts, bias=False)
        self.top_k, self.score, self.normalise = top_k, score, normalise

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.gate(x)
        scores = logits.softmax(-1) if self.score == "softmax" else logits.sigmoid()
        order = torch.sort(scores.detach(), dim=-1, descending=True, stable=True).indices
        experts = order[:, : self.top_k]
        weights = scores.gather(-1, experts)
        if self.normalise:
            weights = weights / weights.sum(-1, keepdim=True)
        return experts, weights


class MoE(nn.Module):
    """``router``, ``experts`` (an ``nn.ModuleList`` of `Expert`) and ``shared`` (an `Expert`
    every token goes through, or None). ``forward`` runs every expert in this one process."""

    def __init__(self, experts: int, top_k: int, score: str, normalise: bool, shared: bool) -> None:
        super().__init__()
        self.router = Router(experts, top_k, score, normalise)
        self.experts = nn.ModuleList(Expert() for _ in range(experts))
        self.shared = Expert() if shared else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        experts, weights = self.router(x)
        out = self.shared(x) if self.shared is not None else torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            token, slot = (experts == e).nonzero(as_tuple=True)
            if len(token):
                out = out.index_add(0, token, weights[token, slot, None] * expert(x[token]))
        return out


def make_moe(
    seed: int,
    experts: int = 4,
    top_k: int = 2,
    score: str = "softmax",
    normalise: bool = True,
    shared: bool = True,
    silent: tuple[int, ...] = (),
) -> MoE:
    """The same MoE for the same arguments, in any process. The experts in ``silent`` are never
    chosen: their router rows are pushed far down, so that they receive no token."""
    generator = torch.Generator().manual_seed(seed)
    moe = MoE(experts, top_k, score, normalise, shared)
    with torch.no_grad():
        for p in moe.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.5)
        for e in silent:
            moe.router.gate.weight[e] = 0.0
        if silent:
            # a constant input feature pushes the silent experts down (every token has it)
            moe.router.gate.weight[list(silent), 0] = -40.0
    return moe


def make_tokens(count: int, generator: torch.Generator) -> torch.Tensor:
    """``count`` tokens; the first feature is 1 in every token (so that `make_moe`'s silent
    experts stay silent), the rest random."""
    x = torch.randn(count, DIM, generator=generator)
    x[:, 0] = 1.0
    return x


def owned_experts(rank: int, world_size: int, experts: int) -> range:
    """The experts rank owns: a contiguous block, rank * E // world_size up to (rank + 1) * E //
    world_size (when E does not divide, the later ranks own one more)."""
    return range(rank * experts // world_size, (rank + 1) * experts // world_size)


def owner(expert: int, world_size: int, experts: int) -> int:
    """The rank that owns ``expert``."""
    return next(r for r in range(world_size) if expert in owned_experts(r, world_size, experts))
