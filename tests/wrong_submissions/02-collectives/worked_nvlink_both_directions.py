"""Divides the bytes a GPU sends in a node by NVLink's 900 GB/s, both directions added, instead of
the 450 GB/s it sends at; the rest right.

replaces: worked
fails: test_worked_node
says: use 900 GB/s, NVLink's two directions added
"""

import math

gradient_bytes = 7e9 * 2
ring_bytes = 2 * (8 - 1) / 8 * gradient_bytes
node_seconds = ring_bytes / 900e9
nodes_seconds = 2 * (32 - 1) / 32 * gradient_bytes / (400e9 / 8)
latency_ratio = (2 * (64 - 1)) / (2 * math.ceil(math.log2(64)))
