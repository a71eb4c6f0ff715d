"""Each rank runs every expert on its own tokens: right outputs, no expert parallelism.

replaces: ep_forward
fails: test_ep_forward test_ep_forward_more
says: each rank computes only its own experts
"""


def ep_moe_forward(rank, world_size, moe, x, exchange):
    return moe(x)
