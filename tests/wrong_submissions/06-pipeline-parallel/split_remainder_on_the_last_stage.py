"""Gives every stage len(costs) // num_stages layers and the last stage the rest, whatever the
layers cost: with 10 layers on 4 stages, 2, 2, 2 and 4, and the head among the last four.

replaces: split
fails: test_split test_split_more
says: leave the last stage every layer they did not take
"""


def split_layers(costs, num_stages):
    if len(costs) < num_stages:
        raise ValueError("fewer layers than stages")
    size = len(costs) // num_stages
    stages = [range(s * size, (s + 1) * size) for s in range(num_stages - 1)]
    return stages + [range((num_stages - 1) * size, len(costs))]
