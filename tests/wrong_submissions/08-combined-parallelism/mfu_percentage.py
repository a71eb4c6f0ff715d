"""Returns the MFU as a percentage.

replaces: best
fails: test_mfu
says: not a percentage
"""


def mfu(model, cluster, config, seconds):
    tokens = config.dp * config.micro_batches * config.micro_batch * model.seq
    return 100 * 6 * model.params * tokens / (config.gpus * cluster.peak_flops * seconds)
