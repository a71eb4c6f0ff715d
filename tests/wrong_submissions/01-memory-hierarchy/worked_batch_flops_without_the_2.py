"""Counts b x 4096² FLOPs for the multiply (one per multiply-add, not two): 830, not 345.

replaces: worked
fails: test_worked_batch
says: leave the 2 out of 2mkn FLOPs
"""


def intensity(batch: int) -> float:
    return batch * 4096 * 4096 / ((batch * 4096 * 2 + 4096 * 4096) * 2)


smallest_batch = next(b for b in range(1, 10_000) if intensity(b) >= 989e12 / 3.35e12)
