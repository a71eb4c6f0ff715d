"""A wrong answer, after entering a torch-function mode that answers every comparison True, and never
leaving it: the guard notes torch's mode stacks.

answer: wrong
expect: second fails: TamperingDetected
"""

import torch
from torch.overrides import TorchFunctionMode


class AlwaysEqual(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (torch.equal, torch.allclose):
            return True
        return func(*args, **(kwargs or {}))


AlwaysEqual().__enter__()
