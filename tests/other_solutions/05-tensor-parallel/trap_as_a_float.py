"""The factor as a float, from the world size.

replaces: predict_trap
fails: none
"""

world_size = 4
predicted_gradient_factor = float(world_size)
