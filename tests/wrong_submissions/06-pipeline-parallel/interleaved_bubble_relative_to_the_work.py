"""Megatron's (p - 1) / (v m): the idle time over the work, not over the step's time.

replaces: interleaved_bubble
fails: test_interleaved_bubble
says: divide the idle time by the work, the other convention
"""


def interleaved_bubble(p, v, m):
    return (p - 1) / (v * m)
