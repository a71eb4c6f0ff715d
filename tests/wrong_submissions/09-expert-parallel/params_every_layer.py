"""All the model's MoE layers, not those of the GPU's stage.

replaces: expert_params
fails: test_expert_params test_expert_params_more
says: count all the model's MoE layers
"""


def expert_params_per_gpu(spec, moe_layers):
    expert = 3 * spec["hidden"] * spec["expert_ffn"]
    return spec["moe_layers"] * (spec["experts"] / spec["ep"] + spec["shared_experts"]) * expert
