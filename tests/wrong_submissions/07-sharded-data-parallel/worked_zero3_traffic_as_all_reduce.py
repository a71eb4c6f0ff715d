"""Counts ZeRO-3's traffic as data parallelism's 2 Ψ (one all_reduce), forgetting that backward
gathers the parameters again.

replaces: worked
fails: test_worked_comm
says: count 2 Ψ, as for data parallelism
"""

largest_by_stage = [80e9 / 16, 80e9 / (4 + 12 / 8), 80e9 / (2 + 14 / 8), 80e9 / 2]
zero3_seconds = 2 * 7 / 8 * 26e9 / 450e9
gpus_for_70b = 14
