"""Lets Ulysses share out heads that do not divide by cp.

replaces: choose
fails: test_choose_more
says: let Ulysses share out heads that do not divide by cp
"""


def choose_cp(seq, heads, kv_heads, head_dim, cp, memory_budget):
    block = seq / cp * kv_heads * head_dim * 4
    options = {
        "all_gather": ((cp - 1) * block, cp * block),
        "ring": ((cp - 1) * block, 2 * block),
        "ulysses": (
            (cp - 1) / cp * seq / cp * (2 * heads + 2 * kv_heads) * head_dim * 2,
            seq * kv_heads / cp * head_dim * 4,
        ),
    }
    fitting = [(s, i, n) for i, (n, (s, held)) in enumerate(options.items()) if held <= memory_budget]
    return min(fitting)[2] if fitting else None
