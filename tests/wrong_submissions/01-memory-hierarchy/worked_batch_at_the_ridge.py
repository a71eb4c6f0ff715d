"""Takes the ridge point itself as the batch, rounded down (only the weight's traffic, and no ceiling).

replaces: worked
fails: test_worked_batch
says: round down where the batch must be at least the ridge point
"""

smallest_batch = int(989e12 / 3.35e12)
