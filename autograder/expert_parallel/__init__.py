"""Checks for notebook 09 (mixtures of experts and expert parallelism).

- `model`: the MoE layer every rank and the checks build (`make_moe`: a router, routed experts,
  a shared expert), its tokens, and which rank owns which expert.
- `routing`: the routing plan (top-k, weights, capacity, counts; `check_routing_plan`).
- `recording`: what a rank of an expert-parallel layer did: its exchanges, each expert's rows, its
  collectives.
- `dispatch`: the expert-parallel forward (`check_ep_forward`); `backward`: the differentiable
  exchange and the layer's gradients (`check_exchange_grad`, `check_ep_backward`).
- `balance`: Switch's auxiliary loss (`check_balance_loss`), the slowest rank's time
  (`check_slowest_rank`), measured with sleeping experts (`measure_sleeping_experts`).
- `planner`: notebook 08's planner given an ``ep`` axis (DeepSeek-V3's model, layout and cluster);
  `planning`: its checks (`check_expert_params`, `check_ep_link_bytes`).
"""

import launcher

from .backward import check_ep_backward, check_exchange_grad
from .balance import check_balance_loss, check_slowest_rank, measure_sleeping_experts
from .dispatch import check_ep_forward
from .model import DIM, FFN, MoE, make_moe, make_tokens, owned_experts
from .planner import DEEPSEEK_V3, DEEPSEEK_V3_LAYOUT, H800_CLUSTER, moe_plan, moe_spec
from .planning import check_ep_link_bytes, check_expert_params
from .routing import check_routing_plan

launcher.preload("autograder.expert_parallel")

__all__ = [
    "DEEPSEEK_V3",
    "DEEPSEEK_V3_LAYOUT",
    "DIM",
    "FFN",
    "H800_CLUSTER",
    "MoE",
    "check_balance_loss",
    "check_ep_backward",
    "check_ep_forward",
    "check_ep_link_bytes",
    "check_exchange_grad",
    "check_expert_params",
    "check_routing_plan",
    "check_slowest_rank",
    "make_moe",
    "make_tokens",
    "measure_sleeping_experts",
    "moe_plan",
    "moe_spec",
    "owned_experts",
]
