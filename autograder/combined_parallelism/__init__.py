"""Checks for notebook 08 (combining the parallelisms on a device mesh, and planning a run).

- `mesh`: rank <-> coordinates on a mesh of named axes (dp, pp, tp; TP innermost) and the
  members of each axis's groups (`check_mesh_layout`).
- `groups`: `GroupLog`, which records the process group every collective ran on.
- `model`: the small MLP, its data and the single-process reference of the 2D checks.
- `pipeline`: pipeline x data parallel training by hand (`check_pp_dp`).
- `training`: data x tensor parallel training by hand (`check_dp_tp`) and with torch's
  DeviceMesh, `fully_shard` and `parallelize_module` (`check_torch_2d`).
- `layouts`, `published`: the models, clusters and published runs the planner takes, as dicts.
- `planner`: the course's reference planner, ``predict(spec)``; `planning`: the checks of the
  planner's pieces (`check_states`, `check_group_bandwidth`, `check_exposed`, `check_fit_efficiency`,
  `check_mfu`, `check_best`).
"""

import launcher

from .groups import GroupLog
from .layouts import CLUSTERS, GPT_13B, LLAMA_70B, MEGATRON_1T, MODELS, spec
from .mesh import check_mesh_layout, mesh_cases
from .model import DIM, HIDDEN, LAYERS, make_data, make_deep_model, make_model, mse
from .pipeline import check_pp_dp
from .planner import predict
from .planning import (
    check_best,
    check_exposed,
    check_fit_efficiency,
    check_group_bandwidth,
    check_mfu,
    check_states,
)
from .published import A100_CLUSTER, H100_CLUSTER, LLAMA3_405B, llama3_runs, megatron_runs
from .training import check_dp_tp, check_torch_2d

launcher.preload("autograder.combined_parallelism")

__all__ = [
    "A100_CLUSTER",
    "CLUSTERS",
    "DIM",
    "GPT_13B",
    "H100_CLUSTER",
    "HIDDEN",
    "LAYERS",
    "LLAMA3_405B",
    "LLAMA_70B",
    "MEGATRON_1T",
    "MODELS",
    "GroupLog",
    "check_best",
    "check_dp_tp",
    "check_exposed",
    "check_fit_efficiency",
    "check_group_bandwidth",
    "check_mesh_layout",
    "check_mfu",
    "check_pp_dp",
    "check_states",
    "check_torch_2d",
    "llama3_runs",
    "make_data",
    "make_deep_model",
    "make_model",
    "megatron_runs",
    "mesh_cases",
    "mse",
    "predict",
    "spec",
]
