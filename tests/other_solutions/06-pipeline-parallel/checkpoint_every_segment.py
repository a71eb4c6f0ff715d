"""Checkpointing with saved-tensor hooks: each segment runs with autograd on, but every tensor it
saves is replaced by its place in the order of saving; the backward runs the segment again from
its input and hands back the tensor saved in that place.

replaces: checkpoint
fails: none
"""

import torch


def _checkpoint_segment(segment, x):
    x_kept = x.detach()  # what is kept: the segment's input
    rebuilt = {}

    def pack(tensor):
        pack.count += 1
        return pack.count - 1

    pack.count = 0

    def unpack(place):
        if not rebuilt:
            saved = []
            with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(saved.append, lambda t: t):
                segment(x_kept.requires_grad_(x.requires_grad))
            rebuilt.update(enumerate(saved))
        return rebuilt.pop(place)

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        return segment(x)


def checkpointed(layers, x, segments):
    size = len(layers) // segments
    for s in range(segments):
        x = _checkpoint_segment(layers[s * size : (s + 1) * size], x)
    return x


def checkpoint_costs(num_layers, segments):
    return (segments, num_layers)
