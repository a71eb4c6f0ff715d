"""Gives the latency share as a percentage where the statement asks for a fraction.

replaces: worked
fails: test_worked_latency
"""

latency_share = 100 * 2 * 31 * 3e-6 / cluster_seconds  # noqa: F821 - the solution cell defines it
