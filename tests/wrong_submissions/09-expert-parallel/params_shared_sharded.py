"""The shared experts are split over EP like the routed ones.

replaces: expert_params
fails: test_expert_params test_expert_params_more
says: shard the shared experts over EP too
"""


def expert_params_per_gpu(spec, moe_layers):
    expert = 3 * spec["hidden"] * spec["expert_ffn"]
    return moe_layers * (spec["experts"] + spec["shared_experts"]) / spec["ep"] * expert
