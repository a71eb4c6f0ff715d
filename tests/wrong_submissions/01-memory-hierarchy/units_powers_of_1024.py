"""Uses powers of 1024 for the prefixes; bandwidths are quoted in powers of 1000.

replaces: moving_bytes
fails: test_units
says: use powers of 1024
"""


def bytes_per_second(value: float, unit: str) -> float:
    prefixes = {"": 1, "k": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    rate = value * prefixes[unit[:-3]]
    return rate if unit[-3] == "B" else rate / 8
