"""A clock that moves one whole time unit at a time: right while every duration is whole, wrong
as soon as a forward takes half a unit.

replaces: bubble
fails: test_simulate
says: Your clock seems to move in whole time units
"""

import itertools


def simulate(orders, forward=1, backward=2):
    num_stages = len(orders)
    times, done, free = {}, [0] * num_stages, [0] * num_stages
    for tick in itertools.count():
        if all(done[s] == len(orders[s]) for s in range(num_stages)):
            return times
        if tick > 10_000:
            raise ValueError("these orders wait on each other forever")
        for s in range(num_stages):
            if done[s] == len(orders[s]) or free[s] > tick:
                continue
            kind, i = orders[s][done[s]]
            if kind == "F":
                need = (s - 1, "F", i) if s > 0 else None
            else:
                need = (s + 1, "B", i) if s < num_stages - 1 else (s, "F", i)
            if need is None or (need in times and times[need][1] <= tick):
                times[(s, kind, i)] = (tick, tick + (forward if kind == "F" else backward))
                free[s], done[s] = tick + (forward if kind == "F" else backward), done[s] + 1
