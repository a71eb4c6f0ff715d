"""Adds in the all-gather phase too, so chunks are reduced twice.

replaces: ring
fails: test_ring test_ring_more
says: add what arrives in the all-gather too
"""

import torch
import torch.distributed as dist


def ring_all_reduce(tensor: torch.Tensor) -> None:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    right, left = (rank + 1) % world_size, (rank - 1) % world_size
    chunks = list(tensor.view(-1).tensor_split(world_size))
    for phase in ("reduce-scatter", "all-gather"):
        for step in range(world_size - 1):
            offset = 0 if phase == "reduce-scatter" else 1
            send_index = (rank + offset - step) % world_size
            recv_index = (rank + offset - step - 1) % world_size
            request = dist.isend(chunks[send_index], dst=right)
            buffer = torch.empty_like(chunks[recv_index])
            dist.recv(buffer, src=left)
            chunks[recv_index] += buffer
            request.wait()
