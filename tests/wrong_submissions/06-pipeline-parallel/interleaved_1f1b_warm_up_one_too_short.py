"""Megatron-LM's warm-up count without the forward its steady state begins with: the first
backward is put one forward earlier than it can have come back.

replaces: interleaved_1f1b
fails: test_interleaved_1f1b test_interleaved_1f1b_more test_interleaved_1f1b_run
says: one too few
"""


def interleaved_1f1b(num_devices, device, num_microbatches, num_chunks):
    p, v = num_devices, num_chunks
    total = num_microbatches * v

    def step(kind, k):
        group, within = divmod(k, p * v)
        chunk, j = divmod(within, p)
        return (kind, group * p + j, chunk if kind == "F" else v - 1 - chunk)

    warm_up = min(2 * (p - 1 - device) + (v - 1) * p, total)
    order = [step("F", k) for k in range(warm_up)]
    for k in range(total - warm_up):
        order += [step("B", k), step("F", warm_up + k)]
    return order + [step("B", k) for k in range(total - warm_up, total)]
