"""Sends all the gradients in every step of the ring, not a p-th of them.

replaces: worked
fails: test_worked_ring
says: send all the gradients in every step
"""

ring_seconds = 2 * 7 * 14e9 / 450e9
