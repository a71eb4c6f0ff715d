"""Reads InfiniBand's 400 Gb/s as 400 GB/s.

replaces: worked
fails: test_worked_links
says: read 400 Gb/s as 400 GB/s
"""

infiniband_seconds = 14e9 / 400e9
