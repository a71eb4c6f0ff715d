"""The answers from the notebook's own ring_seconds, in NumPy floats; the crossover by NumPy's solver.

replaces: worked
fails: none
"""

import numpy as np

grads = np.float64(14e9)
nv, nv_alpha, ib, ib_alpha = 450e9, 2e-6, 50e9, 3e-6
ring = ring_seconds  # noqa: F821 - exercise 7 defines it
node_seconds = np.float64(ring(8, grads, nv_alpha, nv))
flat_seconds = np.float64(ring(32, grads, ib_alpha, ib))
two_level_seconds = np.float64(ring(8, grads, nv_alpha, nv) + ring(4, grads / 8, ib_alpha, ib))


def costs(n):
    two = ring(8, n, nv_alpha, nv) + ring(4, n / 8, ib_alpha, ib)
    rings = ring(32, n / 8, ib_alpha, ib)
    return two, rings


# Each time is a + b n: solve a_two + b_two n = a_rings + b_rings n.
(a_two, a_rings), (one_two, one_rings) = costs(0.0), costs(1.0)
two_level_below = np.linalg.solve(
    np.array([[(one_two - a_two) - (one_rings - a_rings)]]), np.array([a_rings - a_two])
)[0]
coalesced_speedup = 64 * ring(8, 4096, nv_alpha, nv) / ring(8, 64 * 4096, nv_alpha, nv)
