"""The ranks' times accumulated by owner, experts with no token skipped.

replaces: slowest
fails: none
"""


def slowest_rank_seconds(expert_counts, world_size, seconds_per_token, seconds_per_call):
    n = len(expert_counts)
    busy = [0.0] * world_size
    for e, count in enumerate(expert_counts):
        if count > 0:
            r = max(r for r in range(world_size) if r * n // world_size <= e)
            busy[r] += seconds_per_call + count * seconds_per_token
    return max(busy)
