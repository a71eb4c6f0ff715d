"""Multiplies by the world size a second time for f's all_reduce, which sums partial gradients.

replaces: predict_trap
fails: test_predict_trap
says: expect f to add it up again
"""

predicted_gradient_factor = 4 * 4
