"""The model and data every check of notebook 04 shares, and how its checks compare parameters.

Every check trains or differentiates `make_mlp`'s MLP on every rank and compares with one process
training on the whole batch (`train_alone`), computed in the checking process.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from ..checks import allclose, fail

NUM_DIM = 16
_type = type  # the checks compare types with what they captured here, not what a cell rebinds


def make_mlp(num_dim: int = NUM_DIM, num_layers: int = 4, seed: int = 0) -> nn.Sequential:
    """The lecture's deep MLP, small enough for a CPU: ``num_layers`` square linear layers with
    a GELU between each, its parameters drawn from ``seed``."""
    layers: list[nn.Module] = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for i in range(num_layers):
            layers.append(nn.Linear(num_dim, num_dim))
            if i < num_layers - 1:
                layers.append(nn.GELU())
    return nn.Sequential(*layers)


def make_batch(batch: int, seed: int, num_dim: int = NUM_DIM) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets of ``batch`` rows, drawn from ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(batch, num_dim, generator=generator), torch.randn(batch, num_dim, generator=generator)


def mse(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The mean squared error over every element."""
    return ((outputs - targets) ** 2).mean()


def train_alone(model: nn.Module, data: torch.Tensor, targets: torch.Tensor, steps: int, lr: float) -> list:
    """One process, the whole batch, plain SGD: what data parallelism must reproduce."""
    for _ in range(steps):
        model.zero_grad()
        mse(model(data), targets).backward()
        with torch.no_grad():
            for p in model.parameters():
                if p.grad is not None:
                    p -= lr * p.grad
    return [p.detach().clone() for p in model.parameters()]


class ShuffledMLP(nn.Module):
    """Four linear layers of different widths (16 -> 20 -> 12 -> 8 -> 16) with a GELU between
    each, *registered* in another order than they run: the third, the first, the fourth, then the
    second. So ``model.parameters()`` lists them in that order, and backward finishes their
    gradients in yet another: the fourth layer's, the third's, the second's, the first's."""

    WIDTHS = (NUM_DIM, 20, 12, 8, NUM_DIM)

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            layers = [nn.Linear(a, b) for a, b in zip(self.WIDTHS, self.WIDTHS[1:], strict=False)]
        self.third, self.first, self.fourth, self.second = layers[2], layers[0], layers[3], layers[1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in (self.first, self.second, self.third):
            x = nn.functional.gelu(layer(x))
        return self.fourth(x)


def tolerance(dtype: torch.dtype) -> dict[str, float]:
    """How close a float result of this dtype must be to a reference computed in float64: a
    float32 rounding passes in float32, not in float64."""
    return {"rtol": 1e-10, "atol": 1e-12} if dtype is torch.float64 else {"rtol": 1e-4, "atol": 1e-6}


def close(a: torch.Tensor, b: torch.Tensor) -> bool:
    """``a`` has ``b``'s shape and dtype, and its values within the tolerance of that dtype."""
    return (
        a.shape == b.shape and a.dtype == b.dtype and allclose(a.double(), b.double(), **tolerance(b.dtype))
    )


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and allclose(a, b, rtol=1e-4, atol=1e-6)


def _params_like(what: str, params: Any, reference: list[torch.Tensor]) -> None:
    __tracebackhide__ = True
    if _type(params) is not list or len(params) != len(reference):
        fail(
            f"{what} returned {params!r:.100}; expected a list of {len(reference)} tensors, the model's "
            "parameters."
        )
    for i, (p, r) in enumerate(zip(params, reference, strict=True)):
        if _type(p) is not torch.Tensor or p.shape != r.shape:
            fail(f"{what}: parameter {i} is {p!r:.80}; expected a tensor of shape {tuple(r.shape)}.")


def _compare(what: str, params: list, reference: list, mistakes: dict[str, list]) -> None:
    __tracebackhide__ = True
    wrong = [i for i, (p, r) in enumerate(zip(params, reference, strict=True)) if not _close(p, r)]
    if not wrong:
        return
    i = wrong[0]
    message = (
        f"{what}: parameter {i} differs from one process's training on the whole batch (largest "
        f"difference {(params[i] - reference[i]).abs().max().item():.3g})."
    )
    for mistake, alternative in mistakes.items():
        if all(_close(p, a) for p, a in zip(params, alternative, strict=True)):
            message += f" That is what you get if you {mistake}."
            break
    fail(message)
