"""A DDP job on Gloo where one rank sleeps a while in every step: a straggler.

    ddp_straggler.py STEPS SLOW_RANK SLOW_MS [no-optimizer]

SLOW_RANK -1 is a healthy job. With no-optimizer the script updates the weights by hand, so the
step boundaries come from DDP's forwards instead of optimizer.step.
"""
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

steps, slow_rank, slow_ms = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
use_optimizer = "no-optimizer" not in sys.argv[4:]
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
torch.set_num_threads(1)
model = DDP(torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(32, 64), torch.randint(0, 4, (32,))
for step in range(steps):
    if rank == slow_rank:
        time.sleep(slow_ms / 1000)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    if use_optimizer:
        opt.zero_grad()
        loss.backward()
        opt.step()
    else:
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= 0.01 * p.grad
                p.grad = None
dist.destroy_process_group()
print("rank %d done" % rank)
