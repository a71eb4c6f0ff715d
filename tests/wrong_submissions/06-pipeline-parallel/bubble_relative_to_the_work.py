"""Divides the idle time by the work, (p - 1) / m: the other convention, not the course's.

replaces: bubble
fails: test_bubble_formula
"""


def bubble_fraction(p, m):
    return (p - 1) / m
