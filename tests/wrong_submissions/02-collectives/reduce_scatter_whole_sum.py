"""reduce_scatter predicted as an all_reduce: every rank gets the whole sum, not its chunk.

replaces: predict
fails: test_predict_all
says: give every rank the whole sum
"""

import torch


def after_reduce_scatter(inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    total = torch.stack(inputs).sum(dim=0)
    return [total.clone() for _ in inputs]
