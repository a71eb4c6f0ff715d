"""The same answers reached another way: times from GB and GB/s, the share from a ratio.

replaces: worked
fails: none
"""

gb = 1e9
states_per_gpu = int((2 + 2 + 4 + 4 + 4) * 70 * gb / 64)
message_gb = 4096 * 8192 * 2 / gb
tp_slowdown = (2 * 15 / 16 * message_gb / min(450, 8 * 50)) / (2 * 7 / 8 * message_gb / 450)
ratio = (6 * 70e9 * 512 * 4096 / 256 / 989e12) / (2 * 31 / 32 * 17.5e9 / 50e9)  # compute over comm
dp_share_256 = 1 / (1 + ratio)
micro_batches_a_replica = 64 // 8
fsdp_over_pp_bytes = (micro_batches_a_replica * 3 * (8 - 1) / 8 * 70e9 * 2 / 8) / (
    2 * 64 * 2 * 4096 * 8192 / 8
)
