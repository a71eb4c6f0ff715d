"""The busiest expert's time, as if each rank held one expert.

replaces: slowest
fails: test_slowest test_slowest_more
says: take the busiest expert
"""


def slowest_rank_seconds(expert_counts, world_size, seconds_per_token, seconds_per_call):
    n = len(expert_counts)

    def cost(e):
        return (seconds_per_call + expert_counts[e] * seconds_per_token) if expert_counts[e] else 0.0

    return max(cost(e) for e in range(n))
