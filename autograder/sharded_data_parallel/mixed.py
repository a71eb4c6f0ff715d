"""`fully_shard` in mixed precision (``MixedPrecisionPolicy(param_dtype=bfloat16,
reduce_dtype=float32)``): the bytes one training step's collectives carry, and the bytes of whole
parameters a rank holds at the end of forward; measured in a rank, and checked against a student's
prediction built on their own element counts (so that a slip in counting elements, already marked
in the traffic exercise, costs nothing here)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from ..checks import fail
from ..comm import _COLLECTIVE_NAMES, _CONTRIBUTED_ARGUMENT
from .common import _type, expect_byte_counts
from .torch_fsdp import fully_shard_traffic_reference

KEYS = ("all_gather", "reduce_scatter", "whole_after_forward")


class _CollectiveBytes(TorchDispatchMode):
    """Bytes of each all_gather's output and each reduce_scatter's input, as whole arrays."""

    def __init__(self, world_size: int) -> None:
        super().__init__()
        self.world_size = world_size
        self.bytes = {"all_gather": 0, "reduce_scatter": 0}

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        op = func.overloadpacket.__name__
        name = _COLLECTIVE_NAMES.get(op)
        if name in self.bytes and func.namespace in ("c10d", "_c10d_functional"):
            given = args[_CONTRIBUTED_ARGUMENT.get(op, 0)]
            tensors = given if isinstance(given, (list, tuple)) else [given]
            nbytes = sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))
            self.bytes[name] += nbytes * (self.world_size if name == "all_gather" else 1)
        return func(*args, **(kwargs or {}))


def mixed_precision_model(
    layers: Sequence[tuple[int, int]], world_size: int, reshard_after_forward: bool
) -> nn.Module:
    """In a rank: linear layers ``(out_features, in_features)`` in a ``Sequential``, each its own
    ``fully_shard`` unit over all ranks, in mixed precision (bf16 parameters, fp32 reduction)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy

    from ..torch_compat import fully_shard

    model = nn.Sequential(*(nn.Linear(in_f, out_f) for out_f, in_f in layers))
    options = {
        "mesh": init_device_mesh("cpu", (world_size,)),
        "reshard_after_forward": reshard_after_forward,
        "mp_policy": MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32),
    }
    for layer in model:
        fully_shard(layer, **options)
    fully_shard(model, **options)
    return model


def measure_fully_shard_step(
    rank: int, world_size: int, layers: Sequence[tuple[int, int]], reshard_after_forward: bool
) -> dict[str, int]:
    """In a rank: linear layers ``(out_features, in_features)``, each its own ``fully_shard`` unit
    in mixed precision (bf16 parameters, fp32 reduction); one training step's all_gather and
    reduce_scatter bytes, and the bytes of whole parameters the model holds when forward returns
    (while a unit is whole, its module's parameters are plain tensors, not DTensors)."""
    from torch.distributed.tensor import DTensor

    model = mixed_precision_model(layers, world_size, reshard_after_forward)
    collectives = _CollectiveBytes(world_size)
    with collectives:
        out = model(torch.randn(4, layers[0][1]))
        whole = sum(p.numel() * p.element_size() for p in model.parameters() if _type(p) is not DTensor)
        out.float().square().mean().backward()
    return {**collectives.bytes, "whole_after_forward": whole}


def fully_shard_bytes_reference(
    layers: Sequence[tuple[int, int]],
    world_size: int,
    reshard_after_forward: bool,
    traffic: dict | None = None,
) -> dict[str, int]:
    """The answer to the mixed-precision exercise, from ``traffic`` (calls and elements, as the
    traffic exercise returns them; the right ones if not given). For the checks only."""
    traffic = traffic or fully_shard_traffic_reference(layers, world_size, reshard_after_forward)
    return {
        "all_gather": 2 * traffic["all_gather"][1],  # the shards are cast to bf16, then gathered
        "reduce_scatter": 4 * traffic["reduce_scatter"][1],  # bf16 gradients cast up to fp32 first
        # Units left whole hold their bf16 copy, without padding; resharded, none is left.
        "whole_after_forward": 0 if reshard_after_forward else 2 * sum(o * (i + 1) for o, i in layers),
    }


def _own_traffic(traffic: Callable, layers: list, world_size: int, reshard: bool) -> dict | None:
    """The student's own element counts, if their traffic function gives a well-formed answer."""
    try:
        answer = traffic(list(layers), world_size, reshard)
    except Exception:  # noqa: BLE001 - a broken traffic function was marked in its own exercise
        return None
    good = (
        _type(answer) is dict
        and set(answer) == {"all_gather", "reduce_scatter"}
        and all(
            _type(v) in (tuple, list) and len(v) == 2 and all(_type(x) is int for x in v)
            for v in answer.values()
        )
    )
    return answer if good else None


def check_fully_shard_bytes(
    predict: Callable, traffic: Callable, cases: Sequence[tuple[Sequence[tuple[int, int]], int, bool]]
) -> None:
    """Check ``predict(layers, world_size, reshard_after_forward)`` against the bytes that follow
    from the student's own ``traffic`` counts (where those are well formed; else the right ones)."""
    __tracebackhide__ = True
    for layers, world_size, reshard in cases:
        layers = [tuple(layer) for layer in layers]
        what = f"fully_shard_bytes({layers}, world_size={world_size}, reshard_after_forward={reshard})"
        own = _own_traffic(traffic, layers, world_size, reshard)
        expected = fully_shard_bytes_reference(layers, world_size, reshard, own)
        answer = predict(list(layers), world_size, reshard)
        expect_byte_counts(what, answer, KEYS)
        if answer == expected:
            continue
        key = next(k for k in KEYS if answer[k] != expected[k])
        message = f"{what}[{key!r}] is {answer[key]}; not what fully_shard holds or sends."
        if own is not None:
            message += " (Checked against your own fully_shard_traffic's element counts.)"
        elements = {
            "all_gather": (own or fully_shard_traffic_reference(layers, world_size, reshard))["all_gather"][
                1
            ],
            "reduce_scatter": (own or fully_shard_traffic_reference(layers, world_size, reshard))[
                "reduce_scatter"
            ][1],
            "whole_after_forward": sum(o * (i + 1) for o, i in layers),
        }[key]
        mistakes = {
            "all_gather": {"gather the fp32 parameters (4 bytes each)": 4 * elements},
            "reduce_scatter": {"reduce the gradients in bf16 (2 bytes each)": 2 * elements},
            "whole_after_forward": {
                "count the units as resharded when they stay whole, or the other way round": (
                    0 if expected[key] else 2 * elements
                ),
                "count the whole parameters in fp32 (4 bytes each)": 4 * elements,
                "count the padded parameters (the padding is only in the communication buffer)": 2
                * sum(-(-o // world_size) * world_size * (i + 1) for o, i in layers),
                "count the padded parameters in fp32 (whole parameters are bf16, and their own rows only)": 4
                * sum(-(-o // world_size) * world_size * (i + 1) for o, i in layers),
            },
        }[key]
        for mistake, value in mistakes.items():
            if answer[key] == value and value != expected[key]:
                message += f" That is what you get if you {mistake}."
                break
        fail(message)
