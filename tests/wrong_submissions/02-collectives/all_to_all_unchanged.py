"""all_to_all predicted as doing nothing: each rank keeps its own input.

replaces: predict
fails: test_predict_all
says: leave each rank's input where it is
"""

import torch


def after_all_to_all(inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    return [x.clone() for x in inputs]
