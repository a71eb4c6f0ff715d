"""gather predicted as an all_gather: ranks other than dst are given the result too.

replaces: predict
fails: test_predict_rooted
says: this rank receives nothing from gather
"""

import torch


def after_gather(inputs: list[torch.Tensor], dst: int) -> list[torch.Tensor | None]:
    return [torch.cat(inputs) for _ in inputs]
