"""Runs the CP group's gather over NVLink, as if its members shared a node.

replaces: worked
fails: test_worked_gather
says: run the gather over NVLink
"""

gather_over_attention = (15 / 16 * 2 * 131072 * 128 * 2 / 450e9) / (2 * 131072**2 * 16384 / 128 / 380e12)
