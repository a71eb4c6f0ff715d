"""The bubble counted in chunk-times: p - 1 of them at each end, each 1/v of a stage's.

replaces: interleaved_bubble
fails: none
"""


def interleaved_bubble(p, v, m):
    idle = (p - 1) / v
    return idle / (m + idle)
