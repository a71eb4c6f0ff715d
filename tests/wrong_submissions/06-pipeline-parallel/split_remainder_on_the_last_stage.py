"""Gives every stage num_layers // num_stages layers and the last stage the rest: with 10 layers
on 4 stages, 2, 2, 2 and 4, and the whole pipeline waits for the last stage.

replaces: split
fails: test_split test_split_more
"""


def split_layers(num_layers, num_stages):
    if num_layers < num_stages:
        raise ValueError("fewer layers than stages")
    size = num_layers // num_stages
    stages = [range(s * size, (s + 1) * size) for s in range(num_stages - 1)]
    return stages + [range((num_stages - 1) * size, num_layers)]
