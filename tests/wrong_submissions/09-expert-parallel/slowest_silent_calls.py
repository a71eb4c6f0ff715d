"""An expert that receives nothing is still charged a call.

replaces: slowest
fails: test_slowest test_slowest_more
says: charge a call to an expert that received no token
"""


def slowest_rank_seconds(expert_counts, world_size, seconds_per_token, seconds_per_call):
    n = len(expert_counts)

    def cost(e):
        return seconds_per_call + expert_counts[e] * seconds_per_token

    per_rank = [
        sum(cost(e) for e in range(r * n // world_size, (r + 1) * n // world_size)) for r in range(world_size)
    ]
    return max(per_rank)
