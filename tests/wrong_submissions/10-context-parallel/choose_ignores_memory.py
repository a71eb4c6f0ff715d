"""Chooses by bytes alone: the all-gather even where the whole sequence's K and V do not fit.

replaces: choose
fails: test_choose_more
says: leave memory out
"""


def choose_cp(seq, heads, kv_heads, head_dim, cp, memory_budget):
    block = seq / cp * kv_heads * head_dim * 4
    options = {"all_gather": (cp - 1) * block, "ring": (cp - 1) * block}
    if heads % cp == 0 and kv_heads % cp == 0:
        options["ulysses"] = (cp - 1) / cp * seq / cp * (2 * heads + 2 * kv_heads) * head_dim * 2
    return min((sent, i, name) for i, (name, sent) in enumerate(options.items()))[2]
