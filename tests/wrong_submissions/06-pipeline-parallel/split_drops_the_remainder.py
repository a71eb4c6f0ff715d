"""Gives every stage len(costs) // num_stages layers, as the lecture does, and leaves the rest out.

replaces: split
fails: test_split test_split_more
says: the stages hold layers 0 to
"""


def split_layers(costs, num_stages):
    if len(costs) < num_stages:
        raise ValueError("fewer layers than stages")
    size = len(costs) // num_stages
    return [range(s * size, (s + 1) * size) for s in range(num_stages)]
