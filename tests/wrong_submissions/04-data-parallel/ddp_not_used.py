"""Does the job by hand again instead of with DistributedDataParallel.

replaces: torch_ddp
fails: test_torch_ddp test_torch_ddp_more
"""


def train_with_torch_ddp(rank, world_size, make_model, data, targets, steps, lr):
    return train_data_parallel(rank, world_size, make_model, data, targets, steps, lr)  # noqa: F821
