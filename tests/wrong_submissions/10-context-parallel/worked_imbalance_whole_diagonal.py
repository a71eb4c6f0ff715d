"""Counts the diagonal block as a whole block.

replaces: worked
fails: test_worked_imbalance
says: count the diagonal block whole
"""

contiguous_imbalance = 16 / 8.5
