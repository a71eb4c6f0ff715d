"""Leaves the output's traffic out of the layer's intensity: 319.

replaces: worked
fails: test_worked_batch
says: leave out writing the output
"""

smallest_batch = next(b for b in range(1, 10_000) if 4096 * b / (b + 4096) >= 989e12 / 3.35e12)
