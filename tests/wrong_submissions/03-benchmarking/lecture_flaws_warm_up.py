"""Counts the untimed warm-up call among the flaws: it is what a benchmark should do.

replaces: lecture
fails: test_lecture_flaws
"""

lecture_flaws = {"A", "B", "C", "D", "E"}
