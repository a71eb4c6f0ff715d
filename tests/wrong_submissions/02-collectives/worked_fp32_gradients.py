"""Counts 4 bytes per gradient, as in fp32, where the gradients are bf16: twice the bytes and
twice both times; the latency right.

replaces: worked
fails: test_worked_bytes test_worked_node test_worked_nodes
says: 4 bytes per bf16 gradient
"""

import math

gradient_bytes = 7e9 * 4
ring_bytes = 2 * (8 - 1) / 8 * gradient_bytes
node_seconds = ring_bytes / 450e9
nodes_seconds = 2 * (32 - 1) / 32 * gradient_bytes / (400e9 / 8)
latency_ratio = (2 * (64 - 1)) / (2 * math.ceil(math.log2(64)))
