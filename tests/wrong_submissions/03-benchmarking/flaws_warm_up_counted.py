"""Counts the untimed calls among the flaws: they are what a benchmark should do.

replaces: lecture
fails: test_lecture_flaws
says: you chose a statement that is not a flaw
"""

benchmark_flaws = {"A", "B", "C"}
