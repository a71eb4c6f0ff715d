"""The reduce-scatter's receive buffer aliases the data: it receives into the chunk itself, then
adds the chunk to itself, so this rank's own part is lost and the received one counted twice.

replaces: ring
fails: test_ring test_ring_more
says: receive into the chunk itself
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
        buffer = chunks[recv_index]  # not a buffer of its own: a view of the data
        dist.recv(buffer, src=left)
        chunks[recv_index] += buffer
        handle.wait()
    for step in range(world_size - 1):
        send_index, recv_index = (rank + 1 - step) % world_size, (rank - step) % world_size
        handle = dist.isend(chunks[send_index], dst=right)
        dist.recv(chunks[recv_index], src=left)
        handle.wait()
