"""Keeps the betas it is given, but updates with Adam's usual (0.9, 0.999) all the same.

replaces: zero1
fails: test_zero1_more
says: use betas (0.9, 0.999) where the optimizer was given
"""


class Zero1AdamW(Zero1AdamW):  # noqa: F821 - the solution cell defines it
    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(params, lr, (0.9, 0.999), eps, weight_decay)
