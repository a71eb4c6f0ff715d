"""Runs the lecture's own formula on a time made up to give that busbw; the flaws as a string of letters.

replaces: lecture
fails: none
"""


def lecture_printed(name, busbw, world_size):
    n = world_size
    output_bytes = 4 * 100 * 2**20  # any size will do: the figure does not depend on it
    if name == "all_reduce":
        seconds = output_bytes * 2 * (n - 1) / n / (busbw * 1e9)
        return output_bytes * 2 * (n - 1) / (n * seconds) / 1024**3
    input_bytes = n * output_bytes
    seconds = input_bytes * (n - 1) / n / (busbw * 1e9)
    return output_bytes * (n - 1) / (n * seconds) / 1024**3


benchmark_flaws = "a, c"
