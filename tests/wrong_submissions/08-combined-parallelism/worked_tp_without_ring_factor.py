"""Compares the links' bandwidths alone, leaving out the ring's (n-1)/n.

replaces: worked
fails: test_worked_tp
says: leave out the ring's (n-1)/n
"""

tp_slowdown = 450e9 / min(450e9, 8 * 50e9)
