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

  python3 torch_alltoallv.py --compare OUT [TORCH_OUT]
prints, per size, the median and range over rounds of both sides' time and busbw, reading the
rounds' preflight runs (OUT/d*/preflight.json, out-of-place column) and this script's results
(TORCH_OUT/t*.json, TORCH_OUT defaulting to OUT); BENCHMARKS.md has the interleaved loop that
makes them.
"""

import glob
import json
import statistics
import sys

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


def compare(out, torch_out):
    """Per size: median [min-max] over rounds of time_us and busbw, dlaunch against torch."""
    sides = {"dlaunch": {}, "torch": {}}
    for path in sorted(glob.glob(f"{out}/d*/preflight.json")):
        for op in json.load(open(path))["bandwidth"]:
            if op["op"] == "alltoallv":
                for row in op["rows"]:
                    sides["dlaunch"].setdefault(row["size"], []).append(row)
    for path in sorted(glob.glob(f"{torch_out}/t*.json")):
        for row in json.load(open(path))["rows"]:
            sides["torch"].setdefault(row["size"], []).append(row)

    def spread(rows, key):
        v = [r[key] for r in rows]
        return f"{statistics.median(v):.4g} [{min(v):.4g}-{max(v):.4g}]"

    print("size_B rounds(d/t) dlaunch_time_us torch_time_us dlaunch_busbw torch_busbw "
          "time_ratio(torch/dlaunch)")
    for size in sorted(set(sides["dlaunch"]) & set(sides["torch"])):
        d, t = sides["dlaunch"][size], sides["torch"][size]
        ratio = (statistics.median(r["time_us"] for r in t) /
                 statistics.median(r["time_us"] for r in d))
        print(f"{size} {len(d)}/{len(t)} {spread(d, 'time_us')} {spread(t, 'time_us')} "
              f"{spread(d, 'busbw_gbps')} {spread(t, 'busbw_gbps')} {ratio:.2f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--compare"] and len(sys.argv) in (3, 4):
        compare(sys.argv[2], sys.argv[-1])
    else:
        main()
