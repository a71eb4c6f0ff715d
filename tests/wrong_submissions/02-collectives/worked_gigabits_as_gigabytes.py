"""Reads the 400 Gb/s network link as 400 GB/s, eight times too fast; the rest right.

replaces: worked
fails: test_worked_nodes
says: read 400 Gb/s as 400 GB/s
"""

import math

gradient_bytes = 7e9 * 2
ring_bytes = 2 * (8 - 1) / 8 * gradient_bytes
node_seconds = ring_bytes / 450e9
nodes_seconds = 2 * (32 - 1) / 32 * gradient_bytes / 400e9
latency_ratio = (2 * (64 - 1)) / (2 * math.ceil(math.log2(64)))
