"""Solves the bubble formula for m and rounds up with math.ceil on floats: smallest_m comes out a
float with nothing after the point, which the statement accepts.

replaces: worked
fails: none
"""

import math

smallest_m = float(math.ceil(7 / 0.05 - 7 - 1e-9))
