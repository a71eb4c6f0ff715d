"""Reads b (bits) as B (bytes): network links come out 8 times too fast.

replaces: moving_bytes
fails: test_units
says: read b (bits) as B (bytes)
"""


def bytes_per_second(value: float, unit: str) -> float:
    prefixes = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
    return value * prefixes[unit[:-3]]
