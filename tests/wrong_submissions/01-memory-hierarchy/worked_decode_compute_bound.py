"""Takes batch-1 generation to be compute-bound: 2 FLOPs per parameter at the peak.

replaces: worked
fails: test_worked_decode
says: take the compute floor
"""

tokens_per_second = 989e12 / (2 * 7e9)
