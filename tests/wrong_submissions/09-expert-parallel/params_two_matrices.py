"""An expert counted as two matrices, as an ungated MLP.

replaces: expert_params
fails: test_expert_params test_expert_params_more
says: count two matrices an expert
"""


def expert_params_per_gpu(spec, moe_layers):
    expert = 2 * spec["hidden"] * spec["expert_ffn"]
    return moe_layers * (spec["experts"] / spec["ep"] + spec["shared_experts"]) * expert
