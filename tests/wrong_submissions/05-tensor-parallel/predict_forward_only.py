"""Predicts only the forward all_reduce of the tensor-parallel MLP, forgetting the input's gradient.

replaces: predict_traffic
fails: test_predict_tp
says: count the forward pass only
"""

predicted_tp_values = 32 * 16
