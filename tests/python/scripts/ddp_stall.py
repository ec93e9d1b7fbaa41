# DDP on Gloo; at step 2 rank 1 stalls inside backward (a layer whose backward sleeps), so the
# others wait in a gradient bucket's all-reduce that rank 1 never joins.
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

STALL_STEP = 2


class SlowBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        if dist.get_rank() == 1 and SlowBackward.step == STALL_STEP:
            time.sleep(3600)
        return grad


SlowBackward.step = 0


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(64, 256)
        self.b = torch.nn.Linear(256, 10)

    def forward(self, x):
        return self.b(SlowBackward.apply(torch.relu(self.a(x))))


dist.init_process_group("gloo")
torch.manual_seed(0)
model = DDP(Net(), bucket_cap_mb=0.01)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(int(os.environ.get("STEPS", "5"))):
    SlowBackward.step = step
    opt.zero_grad()
    loss = model(torch.randn(32, 64)).sum()
    loss.backward()
    opt.step()
    print("rank", dist.get_rank(), "step", step, flush=True)
dist.destroy_process_group()
