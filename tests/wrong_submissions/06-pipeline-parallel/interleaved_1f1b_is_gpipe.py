"""Every forward first, then every backward: interleaved GPipe's order, which holds every
micro-batch of every chunk at once.

replaces: interleaved_1f1b
fails: test_interleaved_1f1b test_interleaved_1f1b_more test_interleaved_1f1b_run
says: interleaved GPipe
"""


def interleaved_1f1b(num_devices, device, num_microbatches, num_chunks):
    return interleaved_order(num_devices, device, num_microbatches, num_chunks)  # noqa: F821 - the notebook's
