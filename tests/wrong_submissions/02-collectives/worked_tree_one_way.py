"""Counts the tree's rounds one way only, log2(p) where an all-reduce goes up and down in
2 log2(p); the bytes and times right.

replaces: worked
fails: test_worked_latency
says: count the tree's rounds one way only
"""

import math

gradient_bytes = 7e9 * 2
ring_bytes = 2 * (8 - 1) / 8 * gradient_bytes
node_seconds = ring_bytes / 450e9
nodes_seconds = 2 * (32 - 1) / 32 * gradient_bytes / (400e9 / 8)
latency_ratio = (2 * (64 - 1)) / math.ceil(math.log2(64))
