"""Counts pp micro-batches' activations on the first stage, even when there are fewer than pp of
them (min(pp, m)): with few micro-batches, it overstates the memory and rules out layouts that fit.

replaces: memory
fails: test_memory_more
says: not pp: min(pp, m)
"""


def step_memory(model, cluster, config):
    psi = model.params / (config.tp * config.pp)
    d = config.dp
    states = {0: 16 * psi, 1: 4 * psi + 12 * psi / d, 2: 2 * psi + 14 * psi / d, 3: 16 * psi / d}[config.zero]
    sbh = model.seq * config.micro_batch * model.hidden
    t = config.tp
    if config.recompute:
        per_layer = 2 * sbh / t if config.sequence_parallel else 2 * sbh
    elif config.sequence_parallel:
        per_layer = 34 * sbh / t
    else:
        per_layer = sbh * (10 + 24 / t)
    return states + per_layer * model.layers / config.pp * config.pp
