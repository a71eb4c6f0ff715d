"""Times the attention over the whole square of scores, as if there were no causal mask.

replaces: worked
fails: test_worked_gather
says: count the whole square of attention
"""

gather_over_attention = (15 / 16 * 2 * 131072 * 128 * 2 / 50e9) / (4 * 131072**2 * 16384 / 128 / 380e12)
