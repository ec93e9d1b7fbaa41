#!/usr/bin/env python3
"""Writes a synthetic run directory of many ranks for the report benchmark (BENCHMARKS.md).

Every rank gets an events.jsonl of telemetry samples (host RSS and CUDA figures that climb, with a
few ranks that climb faster and one straggler), rank 0 the trainer's "memory" and "eval" events,
one rank an OOM at the end; the run gets a summary.json of one failed attempt and a preflight.json
with a busbw sweep and a full p2p matrix (world_size x world_size) with two slow links. Formats as
docs/run-directory.md describes them.

usage: make_run_dir.py OUT_DIR [--ranks 1024] [--samples 400]
"""
import argparse
import json
import os
import random

MIB = 1 << 20


def line(unix_ms, rank, kind, **body):
    doc = {"schema": "dlaunch.events/1", "unix_ms": unix_ms, "rank": rank, "kind": kind}
    doc.update(body)
    return json.dumps(doc, separators=(",", ":")) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--samples", type=int, default=400, help="telemetry lines per rank")
    args = ap.parse_args()
    rng = random.Random(26)
    n, samples = args.ranks, args.samples
    t0 = 1764450000000
    window_ms = 5000
    oom_rank, straggler = n // 3, n // 2
    fast_growers = {7 % n, (n * 3) // 4}
    os.makedirs(args.out, exist_ok=True)
    ranks = []
    end = t0 + samples * window_ms
    for r in range(n):
        d = os.path.join(args.out, "rank%d" % r)
        os.makedirs(d, exist_ok=True)
        growth = 3.0 if r in fast_growers else 1.0
        out = []
        for s in range(1, samples + 1):
            step = s * 10
            phase = ("forward", "backward", "optimizer", "communication")[s % 4]
            alloc = (2000 + growth * 4 * s + rng.uniform(-20, 20)) * MIB
            step_ms = (140 if r == straggler else 100) * rng.uniform(0.95, 1.05)
            out.append(line(t0 + s * window_ms, r, "telemetry", step=step, total_steps=samples * 10,
                            loss=2.5 / (1 + s / 50) + rng.uniform(0, 0.02), phase=phase,
                            step_ms=step_ms, compute_ms=step_ms * 0.7,
                            comm_wait_ms=step_ms * rng.uniform(0.2, 0.3),
                            samples_per_sec=320, bytes_communicated=1 << 26,
                            rss_bytes=int((3000 + s * 0.5 + rng.uniform(-5, 5)) * MIB),
                            peak_rss_bytes=int((3000 + s * 0.5 + 10) * MIB),
                            device_allocated_bytes=int(alloc),
                            device_reserved_bytes=int(alloc + 512 * MIB),
                            device_peak_bytes=int(alloc + 256 * MIB),
                            device_free_bytes=int(80000 * MIB - alloc),
                            device_total_bytes=81920 * MIB))
            if r == 0 and s % 50 == 0:
                phases = {p: {"rss_bytes": int(3000 * MIB),
                              "device_allocated_bytes": int(alloc + k * 300 * MIB)}
                          for k, p in enumerate(("data", "forward", "backward", "optimizer"))}
                out.append(line(t0 + s * window_ms, r, "memory", step=step, phases=phases))
                out.append(line(t0 + s * window_ms + 100, r, "eval", epoch=s // 50, step=step,
                                test_accuracy=0.6 + 0.3 * (1 - 1 / (1 + s / 100)),
                                test_loss=2.0 / (1 + s / 50)))
        if r == oom_rank:
            out.append(line(end, r, "oom", message="CUDA out of memory. Tried to allocate 2.00 GiB"))
        with open(os.path.join(d, "events.jsonl"), "w") as f:
            f.writelines(out)
        ranks.append({"rank": r, "local_rank": r % 8, "host": "node%04d" % (r // 8), "pid": 10000 + r,
                      "status": "failed" if r == oom_rank else "killed", "start_unix_ms": t0,
                      "end_unix_ms": end + 2000, "exit_code": 1 if r == oom_rank else -15,
                      **({} if r == oom_rank else {"signal": "SIGTERM"})})
    summary = {"schema": "dlaunch.summary/1", "run_id": "synthetic-%d" % n, "host": "node0000",
               "exit_code": 1, "restarts": 0, "updated_unix_ms": end + 3000,
               "error": "rank %d: CUDA out of memory" % oom_rank, "ranks": ranks,
               "attempts": [{"attempt": 0, "restart_count": 0, "nnodes": (n + 7) // 8,
                             "world_size": n, "start_unix_ms": t0, "end_unix_ms": end + 3000,
                             "exit_code": 1, "error": "rank %d: CUDA out of memory" % oom_rank}]}
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f)
    bandwidth = []
    for op in ("allreduce", "allgather", "reducescatter", "broadcast"):
        rows = []
        size = 1024
        while size <= 1 << 30:
            bw = 180 * size / (size + (1 << 22))
            rows.append({"size": size, "count": size // 4, "type": "float", "redop": "sum", "root": 0,
                         "time_us": size / (bw * 1e3), "algbw_gbps": bw, "busbw_gbps": bw,
                         "wrong": 0, "in_place": {"time_us": size / (bw * 1e3),
                                                  "algbw_gbps": bw * 0.97,
                                                  "busbw_gbps": bw * 0.97, "wrong": 0}})
            size *= 2
        bandwidth.append({"op": op, "rows": rows, "avg_busbw_gbps": 90})
    slow = [(5, 9), (n - 2, 1)]
    matrix = [[0 if i == j else round(rng.uniform(40, 48), 2) for j in range(n)] for i in range(n)]
    for s, d in slow:
        matrix[s][d] = 4.0
    preflight = {"schema": "dlaunch.preflight/1", "verdict": "FAIL",
                 "reasons": ["2 slow links (10x below the median)"], "world_size": n,
                 "backend": "nccl", "unix_ms": t0 - 60000, "duration_s": 50,
                 "bandwidth": bandwidth,
                 "p2p": {"bytes": 1 << 26, "iters": 5, "matrix_gbps": matrix, "median_gbps": 44,
                         "slow_link_factor": 0.5,
                         "slow_links": [{"src": s, "dst": d, "gbps": 4.0} for s, d in slow],
                         "slow_ranks": [], "wrong": 0}}
    with open(os.path.join(args.out, "preflight.json"), "w") as f:
        json.dump(preflight, f)


if __name__ == "__main__":
    main()
