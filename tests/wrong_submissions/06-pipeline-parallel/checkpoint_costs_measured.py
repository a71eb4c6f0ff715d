"""Predicts nothing: checkpoint_costs runs checkpointed() on fresh layers and measures what it
keeps and reruns, as the test does.

replaces: checkpoint
fails: test_checkpoint
says: computed with tensors
"""

# ruff: noqa: F821 - the notebook's names (DIM, make_layer, checkpointed)

import gc
import weakref

import torch


def checkpoint_costs(num_layers, segments):
    layers = torch.nn.Sequential(*[make_layer() for _ in range(num_layers)])
    phase, calls, outs = ["f"], {"f": 0, "b": 0}, []
    for layer in layers:
        layer.register_forward_pre_hook(lambda m, a: calls.__setitem__(phase[0], calls[phase[0]] + 1))
        layer.register_forward_hook(lambda m, a, o: outs.append(weakref.ref(o)) if phase[0] == "f" else None)
    x = torch.randn(3, DIM, requires_grad=True)
    y = checkpointed(layers, x, segments)
    gc.collect()
    kept = sum(r() is not None for r in outs)
    phase[0] = "b"
    y.sum().backward()
    return (kept, calls["b"])
