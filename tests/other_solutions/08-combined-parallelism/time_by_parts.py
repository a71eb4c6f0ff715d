"""The step time as a dict of parts, summed; the ring's bytes from a helper.

replaces: step_time
fails: none
"""


def _ring_all_reduce_seconds(nbytes, n, bandwidth):
    return 2 * (n - 1) / n * nbytes / bandwidth


def step_time(model, cluster, config):
    def bandwidth(ranks_spanned):
        return cluster.network if ranks_spanned > cluster.gpus_per_node else cluster.nvlink

    activation = 2 * model.seq * config.micro_batch * model.hidden
    parts = {}
    flops = (
        (8 if config.recompute else 6) * model.params * config.micro_batches * config.micro_batch * model.seq
    )
    parts["compute"] = flops / config.tp / config.pp / cluster.peak_flops
    parts["bubble"] = parts["compute"] * (config.pp - 1) / config.micro_batches
    count = model.layers // config.pp if model.layers % config.pp == 0 else model.layers / config.pp
    count *= config.micro_batches * (6 if config.recompute else 4)
    parts["tp"] = count * _ring_all_reduce_seconds(activation, config.tp, bandwidth(config.tp))
    parts["pp"] = (
        2 * config.micro_batches * activation / bandwidth(config.tp * config.pp) if config.pp > 1 else 0
    )
    grads = 2 * model.params / (config.tp * config.pp)
    parts["dp"] = _ring_all_reduce_seconds(grads, config.dp, bandwidth(config.gpus))
    if config.zero == 3:
        parts["dp"] *= 1.5
    return sum(parts.values())
