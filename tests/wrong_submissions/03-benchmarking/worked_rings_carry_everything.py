"""Gives each of the 8 rings across nodes the whole gradients, where each carries an eighth.

replaces: worked
fails: test_worked_two_level test_worked_below
says: send all the gradients across the nodes, not one eighth on each card
"""

inside = 2 * 7 * (2e-6 + 14e9 / (8 * 450e9))
two_level_seconds = inside + 2 * 3 * (3e-6 + 14e9 / (4 * 50e9))
two_level_below = (62 * 3e-6 - 14 * 2e-6 - 6 * 3e-6) / (14 / 3.6e12 + 6 / (4 * 50e9) - 62 / (256 * 50e9))
