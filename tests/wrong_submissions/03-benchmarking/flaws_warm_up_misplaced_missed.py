"""Misses that nothing lines the ranks up, or waits for the untimed calls, before the clock starts.

replaces: lecture
fails: test_lecture_flaws
says: you left out a flaw
"""

benchmark_flaws = "C"
