"""Gives every stage num_layers // num_stages layers, as the lecture does, and leaves the rest out.

replaces: split
fails: test_split test_split_more
"""


def split_layers(num_layers, num_stages):
    if num_layers < num_stages:
        raise ValueError("fewer layers than stages")
    size = num_layers // num_stages
    return [range(s * size, (s + 1) * size) for s in range(num_stages)]
