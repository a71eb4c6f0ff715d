"""Routed and shared counted apart.

replaces: expert_params
fails: none
"""


def expert_params_per_gpu(spec, moe_layers):
    matrix = spec["hidden"] * spec["expert_ffn"]
    routed = spec["experts"] // spec["ep"] * 3 * matrix
    shared = spec["shared_experts"] * 3 * matrix
    return float(moe_layers * (routed + shared))
