"""Gives the backward pass all 6 FLOPs per parameter per token, forward's included.

replaces: worked
fails: test_worked_tokens
says: count 6 FLOPs per token
"""

tokens_to_hide_it = seconds_on_64 * 0.5 * 989e12 / (6 * 7e9)  # noqa: F821 - the solution cell defines it
