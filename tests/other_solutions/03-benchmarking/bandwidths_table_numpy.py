"""A table of factors, NumPy floats, and one rank handled apart (an int 0 where the factor gives 0).

replaces: bandwidths
fails: none
"""

import numpy as np

FACTORS = {  # busbw / algbw, as a function of the world size
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "broadcast": lambda n: 1,
    "reduce": lambda n: 1,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "gather": lambda n: (n - 1) / n,
    "scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
}


def bandwidths(name, count, dtype, seconds, world_size):
    shares = world_size if name.endswith("gather") else 1
    algbw = np.float64(count) * dtype.itemsize * shares / seconds / 1e9
    if world_size == 1 and name not in ("broadcast", "reduce"):
        return algbw, 0
    return algbw, algbw * FACTORS[name](world_size)
