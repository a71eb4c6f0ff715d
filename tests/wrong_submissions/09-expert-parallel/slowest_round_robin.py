"""Experts owned round-robin.

replaces: slowest
fails: test_slowest test_slowest_more
says: give experts to ranks round-robin
"""


def slowest_rank_seconds(expert_counts, world_size, seconds_per_token, seconds_per_call):
    n = len(expert_counts)

    def cost(e):
        return (seconds_per_call + expert_counts[e] * seconds_per_token) if expert_counts[e] else 0.0

    per_rank = [sum(cost(e) for e in range(r, n, world_size)) for r in range(world_size)]
    return max(per_rank)
