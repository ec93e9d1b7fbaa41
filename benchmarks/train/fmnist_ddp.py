#!/usr/bin/python3
"""PyTorch DDP (gloo) counterpart of `dlaunch --nproc N train --data fashion-mnist`.

The same model (cnn: two conv3x3 + batch-norm + max-pool blocks, fc 128, fc 10), the same data
order (dlaunch's sampler: a Fisher-Yates shuffle over mt19937_64 seeded with seed + epoch *
1000003, padded, rank r taking positions r, r + N, ...), the same normalisation (mean and standard
deviation of the training pixels), the same optimizer (SGD, momentum 0.9, weight decay 5e-4), the
same learning-rate schedule (linear warm-up, then cosine to 0, set before every step) and the same
evaluation (batch-norm statistics from rank 0, contiguous test shards, sums all-reduced). Reads the
IDX files with the standard library only. Run under Debian's torchrun:

  torchrun --nproc_per_node 4 --redirects 1 --tee 1 --log_dir /tmp/tr \
      benchmarks/train/fmnist_ddp.py --epochs 2

Rank 0 prints one JSON line per evaluation ({"impl":"pytorch_ddp","event":"eval",...,
"unix_ms":...}) and one closing line with the median step time.
"""
import argparse
import gzip
import json
import math
import os
import statistics
import struct
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

MASK64 = (1 << 64) - 1


class MT19937_64:
    """std::mt19937_64, so that the permutation matches dlaunch's bit for bit."""

    def __init__(self, seed):
        self.mt = [0] * 312
        self.mt[0] = seed & MASK64
        for i in range(1, 312):
            prev = self.mt[i - 1]
            self.mt[i] = (6364136223846793005 * (prev ^ (prev >> 62)) + i) & MASK64
        self.index = 312

    def twist(self):
        mt = self.mt
        for i in range(312):
            x = (mt[i] & 0xFFFFFFFF80000000) | (mt[(i + 1) % 312] & 0x7FFFFFFF)
            xa = x >> 1
            if x & 1:
                xa ^= 0xB5026F5AA96619E9
            mt[i] = mt[(i + 156) % 312] ^ xa
        self.index = 0

    def __call__(self):
        if self.index >= 312:
            self.twist()
        y = self.mt[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & MASK64


def rank_indices(n, rank, world, seed, epoch):
    perm = list(range(n))
    rng = MT19937_64(seed + epoch * 1000003)
    for i in range(n - 1, 0, -1):
        j = rng() % (i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    per_rank = (n + world - 1) // world
    perm += perm[:per_rank * world - n]
    return perm[rank::world]


def read_idx(path, dims):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    assert data[0] == 0 and data[1] == 0 and data[2] == 8 and data[3] == dims, path
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return torch.frombuffer(bytearray(data[4 + 4 * dims:]), dtype=torch.uint8).reshape(shape)


def find(d, name):
    return os.path.join(d, name + ".gz") if os.path.exists(os.path.join(d, name + ".gz")) \
        else os.path.join(d, name)


class OneDnnLinear(nn.Linear):
    """nn.Linear computed as a 1 x 1 convolution (oneDNN), as `dlaunch train --linear-kernel
    onednn` does: the same parameters, only the kernel differs."""

    def forward(self, x):
        n = x.shape[0]
        return F.conv2d(x.reshape(n, -1, 1, 1), self.weight.view(self.out_features, -1, 1, 1),
                        self.bias).view(n, -1)


def make_model(classes, linear=nn.Linear):
    return nn.Sequential(nn.Unflatten(1, (1, 28, 28)),
                         nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
                         nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         linear(64 * 7 * 7, 128), nn.ReLU(), linear(128, classes))


def lr_at(a, step, total):
    if step < a.warmup_steps:
        return a.lr * (step + 1) / a.warmup_steps
    t = min(1.0, (step - a.warmup_steps) / max(total - a.warmup_steps, 1))
    return a.lr * 0.5 * (1 + math.cos(math.pi * t))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=0.0005)
    p.add_argument("--warmup-steps", type=int, default=100)
    p.add_argument("--eval-batch-size", type=int, default=500)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--bucket-mb", type=float, default=25.0)
    p.add_argument("--linear-kernel", choices=["blas", "onednn"], default="blas",
                   help="blas: nn.Linear (PyTorch's own); onednn: dlaunch's default kernel")
    a = p.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    train_x = read_idx(find(a.data_dir, "train-images-idx3-ubyte"), 3).reshape(-1, 784)
    train_y = read_idx(find(a.data_dir, "train-labels-idx1-ubyte"), 1).long()
    test_x = read_idx(find(a.data_dir, "t10k-images-idx3-ubyte"), 3).reshape(-1, 784)
    test_y = read_idx(find(a.data_dir, "t10k-labels-idx1-ubyte"), 1).long()
    pixels = train_x.double() / 255
    mean, std = pixels.mean().item(), pixels.std(unbiased=False).item()
    del pixels

    def images(u8):
        return u8.float().sub_(mean * 255).div_(std * 255)

    torch.manual_seed(a.seed)
    classes = int(max(train_y.max(), test_y.max())) + 1
    linear = OneDnnLinear if a.linear_kernel == "onednn" else nn.Linear
    model = DDP(make_model(classes, linear), bucket_cap_mb=a.bucket_mb, broadcast_buffers=False)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum,
                          weight_decay=a.weight_decay)
    n = train_x.shape[0]
    steps_per_epoch = ((n + world - 1) // world) // a.batch_size
    total = a.epochs * steps_per_epoch
    base, extra = divmod(test_x.shape[0], world)
    begin = rank * base + min(rank, extra)
    end = begin + base + (1 if rank < extra else 0)

    times = []
    step = 0
    for epoch in range(a.epochs):
        epoch_start = time.perf_counter()
        idx = torch.tensor(rank_indices(n, rank, world, a.seed, epoch))
        loss_sum = 0.0
        for s in range(steps_per_epoch):
            t0 = time.perf_counter()
            b = idx[s * a.batch_size:(s + 1) * a.batch_size]
            x, y = images(train_x.index_select(0, b)), train_y.index_select(0, b)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            for g in opt.param_groups:
                g["lr"] = lr_at(a, step, total)
            opt.step()
            opt.zero_grad()
            loss_sum += loss.item()
            times.append((time.perf_counter() - t0) * 1000)
            step += 1
        # Evaluation as dlaunch does it: rank 0's batch-norm statistics, disjoint shards.
        net = model.module
        for buf in net.buffers():
            if buf.dtype == torch.float32:
                dist.broadcast(buf, 0)
        net.eval()
        sums = torch.zeros(5, dtype=torch.float64)
        with torch.no_grad():
            for first in range(begin, end, a.eval_batch_size):
                last = min(first + a.eval_batch_size, end)
                logits = net(images(test_x[first:last]))
                sums[0] += (logits.argmax(1) == test_y[first:last]).sum().item()
                sums[1] += F.cross_entropy(logits, test_y[first:last], reduction="sum").item()
        net.train()
        sums[2] = end - begin
        sums[3] = loss_sum
        sums[4] = steps_per_epoch
        dist.all_reduce(sums)
        if rank == 0:
            print(json.dumps({"impl": "pytorch_ddp", "event": "eval", "epoch": epoch + 1,
                              "test_accuracy": sums[0].item() / sums[2].item(),
                              "test_loss": sums[1].item() / sums[2].item(),
                              "train_loss": sums[3].item() / sums[4].item(),
                              "seconds": round(time.perf_counter() - epoch_start, 2),
                              "unix_ms": int(time.time() * 1000)}), flush=True)
    med = torch.tensor([statistics.median(times[10:])])
    dist.all_reduce(med, op=dist.ReduceOp.MAX)
    if rank == 0:
        print(json.dumps({"impl": "pytorch_ddp", "event": "done", "world_size": world,
                          "step_ms_median": round(med.item(), 3),
                          "threads": torch.get_num_threads()}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
