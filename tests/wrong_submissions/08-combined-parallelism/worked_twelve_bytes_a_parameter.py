"""Counts only Adam's fp32 states, not the bf16 parameters and gradients.

replaces: worked
fails: test_worked_states
says: count only Adam's fp32 states
"""

states_per_gpu = 12 * 70e9 / 64
