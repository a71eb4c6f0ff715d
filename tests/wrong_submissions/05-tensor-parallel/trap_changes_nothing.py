"""Expects an all_reduce of gradients that are equal on every rank to leave them as they are.

replaces: predict_trap
fails: test_predict_trap
says: expect a backward all_reduce of equal copies to change nothing
"""

predicted_gradient_factor = 1
