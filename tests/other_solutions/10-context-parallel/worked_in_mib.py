"""The same answers worked through in other units and orders.

replaces: worked
fails: none
"""

mib = 2**20
kv_bytes_per_layer = 64 * mib  # 131072 tokens x 128 wide x 2 (K, V) x 2 bytes, one KV head a GPU
kv_kept_all_layers = kv_bytes_per_layer * 8 * 16
contiguous_imbalance = 31 / 16  # pairs: last rank 31/2 chunk-squares, the mean 256/2/16
gather_ms = 15 / 16 * kv_bytes_per_layer / 50e6
attention_ms = 2 * 131072**2 * 16384 / 128 / 380e9
gather_over_attention = gather_ms / attention_ms
