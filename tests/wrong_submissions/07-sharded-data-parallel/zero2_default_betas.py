"""Keeps the betas it is given, but updates with Adam's usual (0.9, 0.999) all the same.

replaces: zero2
fails: test_zero2_more
says: use betas (0.9, 0.999) where the optimizer was given
"""


class Zero2AdamW(Zero2AdamW):  # noqa: F821 - the solution cell defines it
    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, bucket_numel=1 << 20):
        super().__init__(params, lr, (0.9, 0.999), eps, weight_decay, bucket_numel)
