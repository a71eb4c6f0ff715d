"""Counts the GPUs after this one once in the warm-up, as if the gradient came back at no cost:
micro-batch 0 must reach the last GPU and its gradient come back, a slot a GPU each way.

replaces: interleaved_1f1b
fails: test_interleaved_1f1b test_interleaved_1f1b_more test_interleaved_1f1b_run
says: counts the ranks after this one once
"""


def interleaved_1f1b(num_devices, device, num_microbatches, num_chunks):
    p, v = num_devices, num_chunks
    total = num_microbatches * v

    def step(kind, k):
        group, within = divmod(k, p * v)
        chunk, j = divmod(within, p)
        return (kind, group * p + j, chunk if kind == "F" else v - 1 - chunk)

    warm_up = min((v - 1) * p + (p - 1 - device) + 1, total)
    order = [step("F", k) for k in range(warm_up)]
    for k in range(total - warm_up):
        order += [step("B", k), step("F", warm_up + k)]
    return order + [step("B", k) for k in range(total - warm_up, total)]
