"""Gives reads only half of HBM's 3.35 TB/s, as if writes took the other half: 120 tokens/s.

replaces: worked
fails: test_worked_decode
says: leave reads only half of HBM's bandwidth
"""

tokens_per_second = 3.35e12 / 2 / (7e9 * 2)
