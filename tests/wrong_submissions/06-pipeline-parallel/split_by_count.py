"""The even split of the old exercise: as many layers on every stage as can be (the first stages
one more), whatever each layer costs.

replaces: split
fails: test_split test_split_more
says: Balancing the number of layers balances the time only when every layer costs the same
"""


def split_layers(costs, num_stages):
    if len(costs) < num_stages:
        raise ValueError("fewer layers than stages")
    size, extra = divmod(len(costs), num_stages)
    stages, start = [], 0
    for s in range(num_stages):
        end = start + size + (s < extra)
        stages.append(range(start, end))
        start = end
    return stages
