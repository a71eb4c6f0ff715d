"""Predicts DDP's traffic from the weights alone, though their biases' gradients are all_reduced too.

replaces: predict_traffic
fails: test_predict_dp
says: leave out the biases
"""

predicted_dp_values = 2 * 16 * 64
