"""One copy a routed expert over InfiniBand.

replaces: worked
fails: test_worked_ib_seconds
says: send one copy per expert over InfiniBand
"""

ib_seconds = 4096 * 8 * 7168 * (1 + 4 / 128 + 2) / 50e9
