"""Uses NVLink's 900 GB/s, which adds both directions; a ring sends one way.

replaces: worked
fails: test_worked_node
says: use NVLink's 900 GB/s (both directions added)
"""

node_seconds = 2 * 7 * (2e-6 + 7e9 * 2 / (8 * 900e9))
