"""The mean rank's time, not the slowest's.

replaces: slowest
fails: test_slowest test_slowest_more
says: take the mean over the ranks
"""


def slowest_rank_seconds(expert_counts, world_size, seconds_per_token, seconds_per_call):
    n = len(expert_counts)

    def cost(e):
        return (seconds_per_call + expert_counts[e] * seconds_per_token) if expert_counts[e] else 0.0

    per_rank = [
        sum(cost(e) for e in range(r * n // world_size, (r + 1) * n // world_size)) for r in range(world_size)
    ]
    return sum(per_rank) / world_size
