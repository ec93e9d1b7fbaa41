#!/usr/bin/python3
"""PyTorch DDP (gloo) counterpart of `dlaunch --nproc N train`, for side-by-side step times.

Same model, data shape, per-rank batch, optimizer (SGD, momentum 0.9) and bucket size as the
dlaunch trainer's defaults. Run under Debian's torchrun (which needs --redirects 1 --tee 1):

  torchrun --nproc_per_node 4 --redirects 1 --tee 1 --log_dir /tmp/tr \
      benchmarks/train/ddp_bench.py --model mlp --steps 300 --batch-size 32

Rank 0 prints one JSON line: {"impl":"pytorch_ddp","step_ms_median":...,"samples_per_sec":...}.
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DistributedSampler


def make_model(name, features, hidden, classes, image_size):
    if name == "mlp":
        return nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                             nn.ReLU(), nn.Linear(hidden, classes))
    pooled = image_size // 4
    # dlaunch's cnn: two conv3x3 (no bias) + batch-norm + ReLU + max-pool blocks, fc 128, fc.
    return nn.Sequential(nn.Unflatten(1, (1, image_size, image_size)),
                         nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1, bias=False),
                         nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(64 * pooled * pooled, 128), nn.ReLU(), nn.Linear(128, classes))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="mlp")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--samples", type=int, default=8192)
    p.add_argument("--features", type=int, default=64)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--image-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--bucket-mb", type=float, default=25.0)
    p.add_argument("--warmup", type=int, default=10)
    a = p.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(42)
    dim = a.image_size * a.image_size if a.model == "cnn" else a.features
    gen = torch.Generator().manual_seed(42)
    x_all = torch.randn(a.samples, dim, generator=gen)
    y_all = torch.randint(0, a.classes, (a.samples,), generator=gen)
    model = DDP(make_model(a.model, dim, a.hidden, a.classes, a.image_size),
                bucket_cap_mb=a.bucket_mb)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    sampler = DistributedSampler(range(a.samples), num_replicas=world, rank=rank, seed=42)
    steps_per_epoch = len(sampler) // a.batch_size

    times = []
    step = 0
    epoch = 0
    while step < a.steps:
        sampler.set_epoch(epoch)
        idx = torch.tensor(list(sampler))
        for s in range(steps_per_epoch):
            if step >= a.steps:
                break
            t0 = time.perf_counter()
            b = idx[s * a.batch_size:(s + 1) * a.batch_size]
            x, y = x_all.index_select(0, b), y_all.index_select(0, b)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            loss.item()
            times.append((time.perf_counter() - t0) * 1000)
            step += 1
        epoch += 1

    measured = times[a.warmup:] if len(times) > a.warmup else times
    med = statistics.median(measured)
    # Slowest rank's median decides the pace of a synchronous job.
    t = torch.tensor([med])
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(json.dumps({"impl": "pytorch_ddp", "world_size": world, "model": a.model,
                          "batch_size": a.batch_size, "steps": a.steps,
                          "step_ms_median": round(t.item(), 3),
                          "samples_per_sec": round(world * a.batch_size * 1000 / t.item(), 1)}),
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
