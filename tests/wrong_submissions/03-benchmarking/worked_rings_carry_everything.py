"""Gives each of the 8 rings the whole gradients, where each carries an eighth.

replaces: worked
fails: test_worked_rings
"""

rings_seconds = 2 * 31 * (3e-6 + 7e9 * 2 / (32 * 50e9))
