"""Predicts from the layers' shapes, written as sums over the parameters and the two collectives.

replaces: predict_traffic
fails: none
"""

tokens, width, wide = 32, 16, 64
predicted_tp_values = int(tokens * width + tokens * width)
predicted_dp_values = sum([wide * width, wide, width * wide, width])
