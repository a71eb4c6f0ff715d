"""Breaks a tie in bytes in favour of the ring, which holds less, not the all-gather.

replaces: choose
fails: test_choose test_choose_more
says: prefer the ring on a tie
"""


def choose_cp(seq, heads, kv_heads, head_dim, cp, memory_budget):
    block = seq / cp * kv_heads * head_dim * 4
    options = {"ring": ((cp - 1) * block, 2 * block), "all_gather": ((cp - 1) * block, cp * block)}
    if heads % cp == 0 and kv_heads % cp == 0:
        sent = (cp - 1) / cp * seq / cp * (2 * heads + 2 * kv_heads) * head_dim * 2
        options["ulysses"] = (sent, seq * kv_heads / cp * head_dim * 4)
    fitting = [(s, i, n) for i, (n, (s, held)) in enumerate(options.items()) if held <= memory_budget]
    return min(fitting)[2] if fitting else None
