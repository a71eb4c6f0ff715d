"""Gives each GPU the whole layer's computation, though the 8 share it.

replaces: worked
fails: test_worked_compute test_worked_overhead
says: forget that the 8 GPUs share the work
"""

compute_ms = 6 * 12 * 8192**2 * (8 * 2048) / (0.5 * 989e12) * 1e3
ndr_overhead = 4 * ndr_ms / compute_ms  # noqa: F821 - the solution cell defines it
