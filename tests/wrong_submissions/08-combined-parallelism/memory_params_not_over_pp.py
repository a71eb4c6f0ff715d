"""Gives every GPU the parameters of all the stages: 1/tp of them, not 1/(tp pp).

replaces: memory
fails: test_memory test_memory_more
says: each GPU holds the parameters of its pipeline stage only
"""


def step_memory(model, cluster, config):
    psi = model.params / config.tp
    d = config.dp
    states = [16 * psi, 4 * psi + 12 * psi / d, 2 * psi + 14 * psi / d, 16 * psi / d][config.zero]
    sbh = model.seq * config.micro_batch * model.hidden
    t = config.tp
    if config.recompute:
        per_layer = 2 * sbh / (t if config.sequence_parallel else 1)
    elif config.sequence_parallel:
        per_layer = 34 * sbh / t
    else:
        per_layer = sbh * (10 + 24 / t)
    in_flight = min(config.pp, config.micro_batches)
    return states + per_layer * model.layers / config.pp * in_flight
