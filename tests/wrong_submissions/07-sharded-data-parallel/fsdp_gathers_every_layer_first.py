"""Starts every layer's all_gather at the start of forward, before running any of them.

replaces: fsdp
fails: test_fsdp test_fsdp_more
says: were alive at once
"""


class FSDPMLP(FSDPMLP):  # noqa: F821 - the solution cell defines it
    def forward(self, x):
        for i in range(len(self.shards)):
            self.prefetch(i)
        return super().forward(x)
