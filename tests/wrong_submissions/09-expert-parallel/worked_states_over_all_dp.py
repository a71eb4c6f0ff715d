"""The experts' optimizer states sharded over the whole DP 128.

replaces: worked
fails: test_worked_states
says: shard the optimizer states over the whole DP 128
"""

expert_state_bytes = 4 * 5 * 3 * 7168 * 2048 * (2 + 2 + 12 / 128)
