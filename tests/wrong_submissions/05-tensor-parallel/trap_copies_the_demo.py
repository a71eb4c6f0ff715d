"""Reads the factor off the demo that follows, which runs on 2 ranks, not the 4 the question asks about.

replaces: predict_trap
fails: test_predict_trap
says: which runs on 2 ranks
"""

predicted_gradient_factor = 2.0
