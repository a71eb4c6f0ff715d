"""Shares the updated shards as torch's ZeroRedundancyOptimizer does: each rank broadcasts its own
shard in turn (the same bytes as one all_gather). Keeps the state in a dict of flat tensors.

replaces: zero1
fails: none
"""

import torch
import torch.distributed as dist


class Zero1AdamW:
    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        self.params = list(params)
        self.hyper = {"lr": lr, "betas": betas, "eps": eps, "wd": weight_decay}
        self.n, self.rank = dist.get_world_size(), dist.get_rank()
        total = sum(p.numel() for p in self.params)
        self.size = (total + self.n - 1) // self.n
        self.total = total
        with torch.no_grad():
            flat = torch.zeros(self.size * self.n)
            flat[:total] = torch.cat([p.reshape(-1) for p in self.params])
        mine = flat[self.rank * self.size : (self.rank + 1) * self.size].clone()
        self.state = {"theta": mine, "m": torch.zeros_like(mine), "v": torch.zeros_like(mine), "t": 0}

    @torch.no_grad()
    def step(self):
        h, s = self.hyper, self.state
        flat = torch.zeros(self.size * self.n)
        flat[: self.total] = torch.cat([p.grad.reshape(-1) for p in self.params])
        g = flat[self.rank * self.size : (self.rank + 1) * self.size]
        s["t"] += 1
        b1, b2 = h["betas"]
        s["theta"] *= 1 - h["lr"] * h["wd"]
        s["m"] = b1 * s["m"] + (1 - b1) * g
        s["v"] = b2 * s["v"] + (1 - b2) * g * g
        m_hat, v_hat = s["m"] / (1 - b1 ** s["t"]), s["v"] / (1 - b2 ** s["t"])
        s["theta"] -= h["lr"] * m_hat / (v_hat.sqrt() + h["eps"])
        for owner, piece in enumerate(flat.split(self.size)):
            if owner == self.rank:
                piece.copy_(s["theta"])
            dist.broadcast(piece, src=owner)  # piece is a view: it lands in flat
        start = 0
        for p in self.params:
            p.copy_(flat[start : start + p.numel()].view_as(p))
            start += p.numel()
