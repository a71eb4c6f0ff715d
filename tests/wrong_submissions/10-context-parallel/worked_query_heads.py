"""Counts the K and V of all 128 query heads.

replaces: worked
fails: test_worked_kv test_worked_kept
says: count all 128 query heads
"""

kv_bytes_per_layer = 2 * 131072 * 16 * 128 * 2
kv_kept_all_layers = 16 * 8 * kv_bytes_per_layer
