"""Counts the tokens of one replica only, against every GPU's peak.

replaces: best
fails: test_mfu
says: count the tokens of one data-parallel replica
"""


def mfu(model, cluster, config, seconds):
    tokens = config.micro_batches * config.micro_batch * model.seq
    return 6 * model.params * tokens / (config.gpus * cluster.peak_flops * seconds)
