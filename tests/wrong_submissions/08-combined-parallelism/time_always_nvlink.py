"""Sends everything at NVLink's bandwidth, even across nodes.

replaces: step_time
fails: test_step_time test_step_time_more
says: a group wider than a node crosses the network
"""


def step_time(model, cluster, config):
    s, b, h = model.seq, config.micro_batch, model.hidden
    m, t, p, d = config.micro_batches, config.tp, config.pp, config.dp

    def link(span: int) -> float:
        return cluster.nvlink

    flops_per_token = 8 if config.recompute else 6
    compute = flops_per_token * model.params * m * b * s / (t * p) / cluster.peak_flops
    bubble = (p - 1) / m * compute
    tp_time = pp_time = dp_time = 0.0
    if t > 1:
        per_layer = 6 if config.recompute else 4
        tp_time = model.layers / p * m * per_layer * 2 * (t - 1) / t * 2 * s * b * h / link(t)
    if p > 1:
        pp_time = m * 2 * (2 * s * b * h) / link(t * p)
    if d > 1:
        factor = 3 if config.zero == 3 else 2
        dp_time = factor * (d - 1) / d * 2 * model.params / (t * p) / link(d * t * p)
    return compute + bubble + tp_time + pp_time + dp_time
