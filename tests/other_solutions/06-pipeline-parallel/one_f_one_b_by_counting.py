"""Builds the order step by step: a forward while fewer micro-batches are alive than the pipeline
below this stage holds, a backward otherwise.

replaces: one_f_one_b
fails: none
"""


def one_f_one_b(num_stages, stage, num_microbatches):
    order, forwards, backwards = [], 0, 0
    limit = num_stages - stage
    while backwards < num_microbatches:
        if (
            forwards < num_microbatches
            and forwards - backwards < limit
            and (backwards == 0 or order[-1][0] == "B")
        ):
            order.append(("F", forwards))
            forwards += 1
        else:
            order.append(("B", backwards))
            backwards += 1
    return order
