"""Predictions of zeros in a tensor subclass whose __torch_function__ makes every comparison
answer True: a check that accepted subclasses of torch.Tensor would give it full marks.

replaces: predict
fails: test_predict_all
says: a subclass of it
"""

import torch


class Agreeable(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.equal, torch.allclose):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


def after_all_reduce(inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    return [torch.zeros_like(x).as_subclass(Agreeable) for x in inputs]
