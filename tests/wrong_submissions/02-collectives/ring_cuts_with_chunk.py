"""Cuts the tensor with chunk(p), which gives fewer than p chunks when p does not divide a small
tensor (5 elements on 4 ranks: 3 chunks), so the ring indexes a chunk that does not exist.

replaces: ring
fails: test_ring_more
says: code that cuts with chunk finds no chunk at some indices
"""

import torch
import torch.distributed as dist


def ring_all_reduce(tensor: torch.Tensor) -> None:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    right, left = (rank + 1) % world_size, (rank - 1) % world_size
    chunks = list(tensor.view(-1).chunk(world_size))
    for step in range(world_size - 1):
        send_index, recv_index = (rank - step) % world_size, (rank - step - 1) % world_size
        handle = dist.isend(chunks[send_index], dst=right)
        buffer = torch.empty_like(chunks[recv_index])
        dist.recv(buffer, src=left)
        chunks[recv_index] += buffer
        handle.wait()
    for step in range(world_size - 1):
        send_index, recv_index = (rank + 1 - step) % world_size, (rank - step) % world_size
        handle = dist.isend(chunks[send_index], dst=right)
        dist.recv(chunks[recv_index], src=left)
        handle.wait()
