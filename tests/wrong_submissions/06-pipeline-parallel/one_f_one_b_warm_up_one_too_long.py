"""Warms up with p - s + 1 forwards: one micro-batch more alive on each stage than 1F1B needs.

replaces: one_f_one_b
fails: test_1f1b test_1f1b_more test_1f1b_run
says: more than it needs
"""


def one_f_one_b(num_stages, stage, num_microbatches):
    warm_up = min(num_stages - stage + 1, num_microbatches)
    order = [("F", i) for i in range(warm_up)]
    for i in range(num_microbatches - warm_up):
        order += [("B", i), ("F", warm_up + i)]
    return order + [("B", i) for i in range(num_microbatches - warm_up, num_microbatches)]
