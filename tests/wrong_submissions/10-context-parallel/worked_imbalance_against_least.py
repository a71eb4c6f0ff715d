"""Compares the busiest rank with the least busy one, not with the mean.

replaces: worked
fails: test_worked_imbalance
says: outside the range any right answer falls in
"""

contiguous_imbalance = 15.5 / 0.5
