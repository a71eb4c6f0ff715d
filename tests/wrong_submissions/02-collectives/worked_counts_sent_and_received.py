"""Counts the bytes each GPU receives as well as those it sends, in bf16: twice every answer.

replaces: worked
fails: test_worked_bytes test_worked_node test_worked_nodes
says: count the bytes each GPU receives as well as those it sends
"""

ring_bytes = 2 * (2 * 7 / 8 * 14e9)
node_seconds = ring_bytes / 450e9
nodes_seconds = 2 * (2 * 31 / 32 * 14e9) / 50e9
latency_ratio = 126 / 12
