"""Reads NDR's 400 Gb/s as 400 GB/s.

replaces: worked
fails: test_worked_cluster test_worked_latency test_worked_bucket test_worked_rings
"""

cluster_seconds = 2 * 31 * (3e-6 + 7e9 * 2 / (32 * 400e9))
latency_share = 2 * 31 * 3e-6 / cluster_seconds
bucket_bytes = 9 * 32 * 400e9 * 3e-6
rings_seconds = 2 * 31 * (3e-6 + 7e9 * 2 / 8 / (32 * 400e9))
