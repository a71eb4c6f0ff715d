"""Checks for notebook 08 (combining the parallelisms on a device mesh, and planning a run).

- `mesh`: rank <-> coordinates on a mesh of named axes (dp, pp, tp; TP innermost) and the
  members of each axis's groups (`check_mesh_layout`).
- `groups`: `GroupLog`, which records the process group every collective ran on.
- `model`: the small MLP, its data and the single-process reference of the 2D checks.
- `pipeline`: pipeline x data parallel training by hand (`check_pp_dp`).
- `training`: data x tensor parallel training by hand (`check_dp_tp`) and with torch's
  DeviceMesh, `fully_shard` and `parallelize_module` (`check_torch_2d`).
- `layouts`: the descriptions of models, clusters and layouts the planner takes.
- `planner`, `planning`: the reference planner and its checks (`check_memory`, `check_time`,
  `check_best`, `check_mfu`).
"""

import launcher

from .groups import GroupLog
from .layouts import (
    A100_NODES,
    GPT_13B,
    H100_NODES,
    LLAMA3_405B,
    LLAMA_70B,
    MEGATRON_1T,
    Cluster,
    Config,
    Model,
)
from .mesh import check_mesh_layout, mesh_cases
from .model import DIM, HIDDEN, LAYERS, make_data, make_deep_model, make_model, mse
from .pipeline import check_pp_dp
from .planning import check_best, check_memory, check_mfu, check_time
from .training import check_dp_tp, check_torch_2d

launcher.preload("autograder.combined_parallelism")

__all__ = [
    "A100_NODES",
    "DIM",
    "GPT_13B",
    "H100_NODES",
    "HIDDEN",
    "LAYERS",
    "LLAMA3_405B",
    "LLAMA_70B",
    "MEGATRON_1T",
    "Cluster",
    "Config",
    "GroupLog",
    "Model",
    "check_best",
    "check_dp_tp",
    "check_memory",
    "check_mesh_layout",
    "check_mfu",
    "check_pp_dp",
    "check_time",
    "check_torch_2d",
    "make_data",
    "make_deep_model",
    "make_model",
    "mesh_cases",
    "mse",
]
