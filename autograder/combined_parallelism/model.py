"""The model, data and single-process reference of notebook 08's 2D training checks."""

from __future__ import annotations

import torch
from torch import nn

DIM, HIDDEN = 6, 12  # HIDDEN divides by every tensor-parallel size the checks use (1 to 4)


def make_model(seed: int = 0) -> nn.Sequential:
    """The MLP of notebook 05: up to HIDDEN, GELU, back down to DIM. Every rank that calls it with
    the same seed gets the same weights (the lecture's way of starting the copies equal)."""
    generator = torch.Generator().manual_seed(seed)
    model = nn.Sequential(nn.Linear(DIM, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, DIM))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.5)
    return model


def make_data(rows: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(rows, DIM, generator=generator), torch.randn(rows, DIM, generator=generator)


def mse(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The mean of the squared errors over every element."""
    return ((outputs - targets) ** 2).mean()


def train_alone(seed: int, data: torch.Tensor, targets: torch.Tensor, steps: int, lr: float) -> list:
    """One process, the whole batch, plain SGD: the parameters every layout must reach."""
    model = make_model(seed)
    for _ in range(steps):
        model.zero_grad()
        mse(model(data), targets).backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= lr * p.grad
    return [p.detach().clone() for p in model.parameters()]


def tp_slices(full: list[torch.Tensor], index: int, size: int) -> list[torch.Tensor]:
    """Tensor-parallel rank ``index``'s shards of the MLP's parameters: the up projection's rows
    (weight and bias), the down projection's columns, and the down projection's whole bias."""
    up_w, up_b, down_w, down_b = full
    rows = slice(index * HIDDEN // size, (index + 1) * HIDDEN // size)
    return [up_w[rows], up_b[rows], down_w[:, rows], down_b]


LAYERS = 4  # the deep MLP's blocks: 1, 2 and 4 stages split them evenly, 3 stages 1, 1 and 2


def make_deep_model(seed: int = 0) -> nn.Sequential:
    """LAYERS blocks of Linear(DIM, DIM) and GELU, for pipeline parallelism: stage s of p holds
    blocks s * LAYERS / p up to (s + 1) * LAYERS / p."""
    generator = torch.Generator().manual_seed(seed)
    model = nn.Sequential(*(nn.Sequential(nn.Linear(DIM, DIM), nn.GELU()) for _ in range(LAYERS)))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.6)
    return model


def train_deep_alone(seed: int, data: torch.Tensor, targets: torch.Tensor, steps: int, lr: float) -> list:
    model = make_deep_model(seed)
    for _ in range(steps):
        model.zero_grad()
        mse(model(data), targets).backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= lr * p.grad
    return [p.detach().clone() for p in model.parameters()]
