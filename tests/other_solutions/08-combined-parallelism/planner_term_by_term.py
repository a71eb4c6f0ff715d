"""The memory as a sum of named terms, the ZeRO states from a table of sharded fractions.

replaces: memory
fails: none
"""

SHARDED = {0: 0, 1: 12, 2: 14, 3: 16}  # of the 16 bytes a parameter, how many the stage shards


def step_memory(model, cluster, config):
    params_here = model.params / config.tp / config.pp
    sharded = SHARDED[config.zero]
    states = (16 - sharded) * params_here + sharded * params_here / config.dp
    tokens = model.seq * config.micro_batch
    if config.recompute:
        kept = 2 * tokens * model.hidden
        if config.sequence_parallel:
            kept /= config.tp
    else:
        split = 24 * tokens * model.hidden / config.tp
        whole = 10 * tokens * model.hidden
        kept = split + (whole / config.tp if config.sequence_parallel else whole)
    stages_layers = model.layers / config.pp
    return states + kept * stages_layers * min(config.micro_batches, config.pp)
