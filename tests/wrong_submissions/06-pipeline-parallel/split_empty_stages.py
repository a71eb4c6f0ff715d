"""Splits evenly, but with fewer layers than stages returns stages with no layers instead of
saying that the pipeline cannot be built.

replaces: split
fails: test_split test_split_more
"""


def split_layers(num_layers, num_stages):
    return [
        range(s * num_layers // num_stages, (s + 1) * num_layers // num_stages) for s in range(num_stages)
    ]
