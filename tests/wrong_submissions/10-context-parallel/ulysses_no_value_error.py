"""Never checks that the heads divide among the ranks.

replaces: ulysses
fails: test_ulysses_more
says: raise a ValueError
"""

_solution_ulysses = ulysses_attention  # noqa: F821 - the solution cell above defines it


def ulysses_attention(rank, world_size, q, k, v, layout, causal):
    if q.shape[0] % world_size:
        return q.clone()  # carries on regardless
    return _solution_ulysses(rank, world_size, q, k, v, layout, causal)
