"""torch.distributed.all_reduce on the gloo backend over nccl-tests-style sizes.

Run under torchrun (Debian's torchrun needs --redirects 1 --tee 1 --log_dir DIR):
  torchrun --nproc_per_node 4 --redirects 1 --tee 1 --log_dir /tmp/tr \
      torch_allreduce.py -b 1K -e 64M -f 4 -w 5 -n 20 --out result.json
Rank 0 writes one JSON document: {"world_size", "rows": [{"size", "count", "time_us", "algbw_gbps",
"busbw_gbps"}]}, with times averaged over ranks and busbw = algbw x 2(n-1)/n as nccl-tests does.
"""

import argparse
import json
import time

import torch
import torch.distributed as dist


def parse_size(text):
    text = text.upper().rstrip("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    return int(text[:-1] if mult != 1 else text) * mult


def sweep_args(minbytes="8", maxbytes="64M", stepfactor=2):
    """nccl-tests' -b -e -f -w -n and --out, parsed, and the sizes they visit."""
    p = argparse.ArgumentParser()
    p.add_argument("-b", "--minbytes", default=minbytes)
    p.add_argument("-e", "--maxbytes", default=maxbytes)
    p.add_argument("-f", "--stepfactor", type=int, default=stepfactor)
    p.add_argument("-w", "--warmup_iters", type=int, default=5)
    p.add_argument("-n", "--iters", type=int, default=20)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    sizes, s = [], parse_size(args.minbytes)
    while s <= parse_size(args.maxbytes):
        sizes.append(s)
        s *= args.stepfactor
    return args, sizes


def seconds_per_op(op, args, n):
    """-w untimed calls, then -n timed ones; the time per call, averaged over the n ranks."""
    for _ in range(args.warmup_iters):
        op()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(args.iters):
        op()
    seconds = (time.perf_counter() - t0) / args.iters
    avg = torch.tensor([seconds], dtype=torch.float64)
    dist.all_reduce(avg)
    return avg.item() / n


def write_rows(path, n, rows):
    with open(path, "w") as f:
        json.dump({"world_size": n, "torch": torch.__version__, "rows": rows}, f, indent=1)


def main():
    args, sizes = sweep_args()
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    rows = []
    for size in sizes:
        count = max(size // 4, 1)
        t = torch.ones(count, dtype=torch.float32)
        seconds = seconds_per_op(lambda: dist.all_reduce(t), args, n)
        algbw = count * 4 / 1e9 / seconds
        rows.append({"size": count * 4, "count": count, "time_us": seconds * 1e6,
                     "algbw_gbps": algbw, "busbw_gbps": algbw * 2 * (n - 1) / n})
    if rank == 0:
        write_rows(args.out, n, rows)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
