"""A wrong answer, after registering a kernel through torch.library that makes every torch.equal
on the CPU say True: the functions the checks captured still call it, so the guard notes the
dispatcher's kernels.

answer: wrong
expect: second fails: TamperingDetected
"""

import warnings

import torch

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    kept = torch.library.Library("aten", "IMPL")
    kept.impl("equal", lambda a, b: True, "CPU")
