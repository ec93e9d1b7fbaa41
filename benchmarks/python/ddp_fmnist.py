"""A PyTorch DDP training loop in the style of pytorch/examples (gloo, CPU): a small CNN on
Fashion-MNIST (Debian's dataset-fashion-mnist; synthetic images of the same shape without it),
a DistributedSampler, SGD. Rank 0 prints the step times after a warm-up:

    STEP_MS median=<ms> p10=<ms> p90=<ms> steps=<n> cpu_ms=<ms>

cpu_ms is the process's CPU time (every thread: the agent's, Gloo's) per measured step, which
other jobs on a shared machine disturb far less than the wall-clock step times.

WRAP=fsdp2 (torch 2.6 and later) shards the same model with FSDP2's fully_shard over a 1-D
DeviceMesh instead of wrapping it in DDP: each layer's parameters all-gathered before its forward
and backward, its gradients reduce-scattered after.

Runs unchanged under dlaunch (with or without its Python agent) and torchrun."""
import gzip
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

DATA = "/usr/share/datasets/fashion-mnist"


def load(batch, steps):
    images = os.path.join(DATA, "train-images-idx3-ubyte.gz")
    n = batch * steps * dist.get_world_size()
    if os.path.exists(images):
        with gzip.open(images) as f:
            raw = f.read()[16:16 + 28 * 28 * n]
        x = torch.frombuffer(bytearray(raw), dtype=torch.uint8).float().div(255).view(-1, 1, 28, 28)
        with gzip.open(os.path.join(DATA, "train-labels-idx1-ubyte.gz")) as f:
            y = torch.frombuffer(bytearray(f.read()[8:8 + x.shape[0]]), dtype=torch.uint8).long()
    else:
        g = torch.Generator().manual_seed(0)
        x = torch.rand(n, 1, 28, 28, generator=g)
        y = torch.randint(0, 10, (n,), generator=g)
    return torch.utils.data.TensorDataset(x, y)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, 1)
        self.conv2 = nn.Conv2d(16, 32, 3, 1)
        self.fc1 = nn.Linear(32 * 12 * 12, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


def wrap(net, how):
    if how == "ddp":
        return nn.parallel.DistributedDataParallel(net)
    if how != "fsdp2":
        raise SystemExit("WRAP=%s: ddp or fsdp2" % how)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    for layer in (net.conv1, net.conv2, net.fc1, net.fc2):
        fully_shard(layer, mesh=mesh)
    return fully_shard(net, mesh=mesh)


def main():
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    batch = int(os.environ.get("BATCH", "32"))
    steps = int(os.environ.get("STEPS", "150"))
    warmup = int(os.environ.get("WARMUP", "20"))
    torch.manual_seed(0)
    data = load(batch, steps + warmup)
    sampler = torch.utils.data.distributed.DistributedSampler(data, shuffle=True, seed=0)
    loader = torch.utils.data.DataLoader(data, batch_size=batch, sampler=sampler, drop_last=True)
    model = wrap(Net(), os.environ.get("WRAP", "ddp"))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    times = []
    cpu_start = 0.0
    for i, (x, y) in enumerate(loader):
        if i == warmup:
            cpu_start = time.process_time()
        t = time.perf_counter()
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if i >= warmup:
            times.append((time.perf_counter() - t) * 1000)
    if dist.get_rank() == 0:
        q = statistics.quantiles(times, n=10)
        cpu_ms = (time.process_time() - cpu_start) * 1000 / len(times)
        print("STEP_MS median=%.3f p10=%.3f p90=%.3f steps=%d cpu_ms=%.3f loss=%.3f" %
              (statistics.median(times), q[0], q[-1], len(times), cpu_ms, float(loss.detach())),
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
