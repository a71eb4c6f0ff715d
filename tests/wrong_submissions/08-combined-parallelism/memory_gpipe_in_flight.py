"""Keeps every micro-batch's activations alive, as GPipe does, not the pp of 1F1B.

replaces: memory
fails: test_memory test_memory_more
says: under 1F1B the first stage holds at most pp micro-batches' activations
"""


def step_memory(model, cluster, config):
    psi = model.params / (config.tp * config.pp)
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
    in_flight = config.micro_batches
    return states + per_layer * model.layers / config.pp * in_flight
