"""Multiplies by the world size a second time for f's all_reduce, which sums partial gradients.

replaces: predict_trap
fails: test_predict_trap
"""

predicted_gradient_factor = 4 * 4
