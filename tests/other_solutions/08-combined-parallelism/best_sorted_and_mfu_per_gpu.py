"""Sorts the candidates that fit by (time, memory) and takes the first; MFU as achieved FLOP/s per
GPU over the peak.

replaces: best
fails: none
"""


def best_config(model, cluster, candidates, memory, time):
    fitting = sorted(
        (time(model, cluster, c), memory(model, cluster, c), i)
        for i, c in enumerate(candidates)
        if memory(model, cluster, c) <= cluster.hbm
    )
    return candidates[fitting[0][2]] if fitting else None


def mfu(model, cluster, config, seconds):
    flops_per_gpu = (
        6 * model.params * config.micro_batches * config.micro_batch * model.seq / (config.tp * config.pp)
    )
    return flops_per_gpu / seconds / cluster.peak_flops
