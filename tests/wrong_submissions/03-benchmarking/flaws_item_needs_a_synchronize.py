"""Counts reading the maximum with .item() among the flaws, though copying it to the host waits for
the GPU as a synchronize would.

replaces: lecture
fails: test_lecture_flaws
says: you chose a statement that is not a flaw
"""

benchmark_flaws = {"A", "C", "F"}
