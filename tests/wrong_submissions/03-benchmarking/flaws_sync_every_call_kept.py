"""Misses that synchronising after every timed call makes each call pay a round trip to the host.

replaces: lecture
fails: test_lecture_flaws
says: you left out a flaw
"""

benchmark_flaws = ["A"]
