"""Divides the idle time by the work, (p - 1) / m: the other convention, not the course's.

replaces: bubble
fails: test_bubble_formula
says: divide the idle time by the work, the other convention
"""


def bubble_fraction(p, m):
    return (p - 1) / m
