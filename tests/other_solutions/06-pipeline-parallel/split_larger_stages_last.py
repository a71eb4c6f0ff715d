"""Puts the extra layers on the last stages instead of the first.

replaces: split
fails: none
"""


def split_layers(num_layers, num_stages):
    if num_stages > num_layers:
        raise ValueError(f"cannot split {num_layers} layers over {num_stages} stages")
    bounds = [s * num_layers // num_stages for s in range(num_stages + 1)]
    return [range(a, b) for a, b in zip(bounds, bounds[1:], strict=False)]
