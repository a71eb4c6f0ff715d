"""Returns GPipe's order: every forward, then every backward; each stage holds all m micro-batches.

replaces: one_f_one_b
fails: test_1f1b test_1f1b_more test_1f1b_run
says: that is GPipe's order
"""


def one_f_one_b(num_stages, stage, num_microbatches):
    return [("F", i) for i in range(num_microbatches)] + [("B", i) for i in range(num_microbatches)]
