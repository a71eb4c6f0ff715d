"""Warms up with p - s - 1 forwards (at least one): it holds few activations, but the stages after
it starve, and the bubble grows.

replaces: one_f_one_b
fails: test_1f1b test_1f1b_more
says: the stages after it would wait for micro-batches it has not sent
"""


def one_f_one_b(num_stages, stage, num_microbatches):
    warm_up = max(1, min(num_stages - stage - 1, num_microbatches))
    order = [("F", i) for i in range(warm_up)]
    for i in range(num_microbatches - warm_up):
        order += [("B", i), ("F", warm_up + i)]
    return order + [("B", i) for i in range(num_microbatches - warm_up, num_microbatches)]
