"""torch.distributed.all_to_all_single with split sizes (gloo), on dlaunch preflight's alltoallv rule.

Rank r sends 1 + ((p - r) mod n) units to rank p, every rank sending n(n+1)/2 units; a unit is the
requested size's float32 elements / (n(n+1)/2), rounded down to 4 elements (16 bytes), exactly as
`dlaunch preflight --ops alltoallv` sizes it (worker/preflight/op_table.h). Run under torchrun
(Debian's torchrun needs --redirects 1 --tee 1 --log_dir DIR):
  torchrun --nproc_per_node 4 --redirects 1 --tee 1 --log_dir /tmp/tr \
      torch_alltoallv.py -b 4K -e 16M -f 4 -w 5 -n 20 --out result.json
Rank 0 writes {"world_size", "rows": [{"size", "count", "time_us", "algbw_gbps", "busbw_gbps"}]}:
times averaged over ranks, algbw = bytes a rank sends / time, busbw = algbw x (1 - 2/(n(n+1))).
The received data is checked against the rule once per size (a wrong element raises).
"""

import torch
import torch.distributed as dist

from torch_allreduce import seconds_per_op, sweep_args, write_rows


def block(unit, src, dst, n):
    return unit * (1 + (dst - src) % n)


def main():
    args, sizes = sweep_args(minbytes="4K", maxbytes="16M", stepfactor=4)
    dist.init_process_group("gloo")
    rank, n = dist.get_rank(), dist.get_world_size()
    units = n * (n + 1) // 2
    rows = []
    for size in sizes:
        unit = (size // 4 // units) & ~3
        count = unit * units
        send = [block(unit, rank, q, n) for q in range(n)]
        recv = [block(unit, q, rank, n) for q in range(n)]
        src = torch.arange(count, dtype=torch.float32) + rank * count
        dst = torch.empty(count, dtype=torch.float32)
        dist.all_to_all_single(dst, src, recv, send)
        # Block q of the output is q's elements after those it sent to ranks before this one.
        want = []
        for q in range(n):
            start = sum(block(unit, q, k, n) for k in range(rank))
            want.append(torch.arange(start, start + recv[q], dtype=torch.float32) + q * count)
        if count and not torch.equal(dst, torch.cat(want)):
            raise SystemExit(f"rank {rank}: all_to_all_single result differs at {size} B")
        seconds = seconds_per_op(lambda: dist.all_to_all_single(dst, src, recv, send), args, n)
        algbw = count * 4 / 1e9 / seconds
        rows.append({"size": count * 4, "count": count, "time_us": seconds * 1e6,
                     "algbw_gbps": algbw, "busbw_gbps": algbw * (1 - 2 / (n * (n + 1)))})
    if rank == 0:
        write_rows(args.out, n, rows)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
