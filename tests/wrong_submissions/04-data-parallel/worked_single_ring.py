"""Runs one ring over all 64 GPUs, as if each node had one network card, not NCCL's eight rings.

replaces: worked
fails: test_worked_seconds test_worked_tokens
says: run one ring over all 64 GPUs
"""

seconds_on_64 = 2 * 63 / 64 * 7e9 * 2 / 50e9
tokens_to_hide_it = seconds_on_64 * 0.5 * 989e12 / (4 * 7e9)
