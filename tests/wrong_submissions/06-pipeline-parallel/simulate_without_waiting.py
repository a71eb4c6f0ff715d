"""Runs each stage's steps back to back from time 0, as if nothing had to arrive from another stage.

replaces: bubble
fails: test_simulate
says: when stage 0 is free and (1, 'B', 0) has finished
"""


def simulate(orders, forward=1, backward=2):
    times = {}
    for stage, order in enumerate(orders):
        clock = 0
        for kind, i in order:
            duration = forward if kind == "F" else backward
            times[(stage, kind, i)] = (clock, clock + duration)
            clock += duration
    return times
