"""Hides the step's reduction under the last micro-batch's forward and backward, though gradients
exist only once its backward makes them.

replaces: exposed
fails: test_exposed test_exposed_more
says: the reduction starts only as the last backward makes gradients
"""


def exposed_dp(reduce, gather, per_micro_batch, forward, backward, micro_batches):
    whole = forward + backward
    each = per_micro_batch / micro_batches
    return max(0.0, reduce - whole) + max(0.0, gather - forward) + micro_batches * max(0.0, each - whole)
