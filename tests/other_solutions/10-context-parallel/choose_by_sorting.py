"""Costs as a table, sorted by (bytes, preference); Ulysses left out when the heads do not divide.

replaces: choose
fails: none
"""


def choose_cp(seq, heads, kv_heads, head_dim, cp, memory_budget):
    value = 2  # bf16
    kv_block = 2 * (seq // cp) * kv_heads * head_dim * value
    table = [
        ("all_gather", (cp - 1) * kv_block, cp * kv_block, 0),
        ("ring", (cp - 1) * kv_block, 2 * kv_block, 1),
    ]
    if not heads % cp and not kv_heads % cp:
        per_rank = seq / cp * head_dim * value
        table.append(
            (
                "ulysses",
                (cp - 1) / cp * per_rank * 2 * (heads + kv_heads),
                2 * seq * kv_heads / cp * head_dim * value,
                2,
            )
        )
    table = sorted((row for row in table if row[2] <= memory_budget), key=lambda row: (row[1], row[3]))
    return table[0][0] if table else None
