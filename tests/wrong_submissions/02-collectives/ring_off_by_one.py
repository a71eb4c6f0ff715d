"""Off-by-one chunk index: the all-gather starts from chunk `rank`, not the finished `rank + 1`.

replaces: ring
fails: test_ring test_ring_more
says: start the all-gather from a chunk this rank has not finished summing
"""

import torch
import torch.distributed as dist


def ring_all_reduce(tensor: torch.Tensor) -> None:
    rank, world_size = dist.get_rank(), dist.get_world_size()
    right, left = (rank + 1) % world_size, (rank - 1) % world_size
    chunks = list(tensor.view(-1).tensor_split(world_size))
    for step in range(world_size - 1):
        send_index, recv_index = (rank - step) % world_size, (rank - step - 1) % world_size
        request = dist.isend(chunks[send_index], dst=right)
        buffer = torch.empty_like(chunks[recv_index])
        dist.recv(buffer, src=left)
        chunks[recv_index] += buffer
        request.wait()
    for step in range(world_size - 1):
        send_index, recv_index = (rank - step) % world_size, (rank - step - 1) % world_size
        request = dist.isend(chunks[send_index], dst=right)
        dist.recv(chunks[recv_index], src=left)
        request.wait()
