"""Has the lecture count the reduce_scatter's input, as nccl-tests does, where it counts the output.

replaces: lecture
fails: test_lecture_more
says: count the reduce_scatter's input
"""


def lecture_printed(name: str, busbw: float, world_size: int) -> float:
    return busbw * 1e9 / 2**30
