"""Receives into a buffer the size of the chunk it sends, not of the chunk that arrives: when p does
not divide the tensor, a message does not fit its receive and Gloo aborts the rank.

replaces: ring
fails: test_ring test_ring_more
says: a receive buffer made like the chunk a rank sends
"""

import torch
import torch.distributed as dist


def ring_all_reduce(tensor: torch.Tensor) -> None:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    right, left = (rank + 1) % world_size, (rank - 1) % world_size
    chunks = list(tensor.view(-1).tensor_split(world_size))
    for step in range(world_size - 1):
        send_index, recv_index = (rank - step) % world_size, (rank - step - 1) % world_size
        handle = dist.isend(chunks[send_index], dst=right)
        buffer = torch.empty_like(chunks[send_index])
        dist.recv(buffer, src=left)
        chunks[recv_index] += buffer[: chunks[recv_index].numel()]
        handle.wait()
    for step in range(world_size - 1):
        send_index, recv_index = (rank + 1 - step) % world_size, (rank - step) % world_size
        handle = dist.isend(chunks[send_index], dst=right)
        dist.recv(chunks[recv_index], src=left)
        handle.wait()
