"""Copies the counts of the measuring cell that follows, which counts another MLP (hidden 12, 48
tokens, 3 ranks), not the one the question asks about.

replaces: predict_traffic
fails: test_predict_tp test_predict_dp
says: which counts another MLP
"""

predicted_tp_values = 1152
predicted_dp_values = 1212
