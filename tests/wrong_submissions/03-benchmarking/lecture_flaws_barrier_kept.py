"""Misses that the barrier after the timed call is timed with it.

replaces: lecture
fails: test_lecture_flaws
"""

lecture_flaws = ["A", "D", "E"]
