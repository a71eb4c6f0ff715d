"""Runs the two-node ring through one NIC, at 50 GB/s, as the course once did.

replaces: worked
fails: test_worked_tp
says: NCCL runs one through each of the node's 8
"""

tp_slowdown = (2 * 15 / 16 / 50e9) / (2 * 7 / 8 / 450e9)
