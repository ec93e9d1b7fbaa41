#!/usr/bin/env python3
"""Multi-node rendezvous side by side: N dlaunch launchers (`--nnodes N --nproc 1 /bin/true`) and
N torchrun agents (c10d rendezvous, `--no-python /bin/true`) on this host, interleaved, each run
timed from the first start to the last exit. Prints one JSON line per run and a summary of medians:

    benchmarks/scale/rendezvous_vs_torchrun.py --build build --torchrun .venv-torch2/bin/torchrun \\
        --nodes 4 16 32 --repeat 3
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(argvs, env, timeout=300):
    start = time.monotonic()
    procs = [subprocess.Popen(a, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for a in argvs]
    codes = [p.wait(timeout=timeout) for p in procs]
    return time.monotonic() - start, codes


def dlaunch_argvs(dlaunch, n, port, tmp):
    return [[dlaunch, "--nnodes", str(n), "--node-rank", str(i), "--rdzv-endpoint",
             "127.0.0.1:%d" % port, "--nproc", "1", "--log-dir", os.path.join(tmp, "n%d" % i),
             "--run-id", "rdzv", "--quiet", "--", "/bin/true"] for i in range(n)]


def torchrun_argvs(torchrun, n, port):
    return [[torchrun, "--nnodes", str(n), "--nproc-per-node", "1", "--rdzv-backend", "c10d",
             "--rdzv-endpoint", "127.0.0.1:%d" % port, "--rdzv-id", "rdzv", "--no-python",
             "/bin/true"] for _ in range(n)]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default="build")
    p.add_argument("--torchrun", required=True)
    p.add_argument("--nodes", type=int, nargs="+", default=[4, 16, 32])
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    dlaunch = os.path.join(os.path.abspath(a.build), "launcher", "dlaunch")
    env = dict(os.environ, DLAUNCH_JOB_TOKEN="rdzv-bench-token-0123456789abcdef")
    results = {}
    for n in a.nodes:
        for rep in range(a.repeat):
            for tool in ("dlaunch", "torchrun"):
                with tempfile.TemporaryDirectory(prefix="dlaunch-rdzv-") as tmp:
                    port = free_port()
                    argvs = (dlaunch_argvs(dlaunch, n, port, tmp) if tool == "dlaunch"
                             else torchrun_argvs(a.torchrun, n, port))
                    wall, codes = timed(argvs, env)
                print(json.dumps({"tool": tool, "nodes": n, "rep": rep, "wall_s": round(wall, 3),
                                  "ok": all(c == 0 for c in codes)}), flush=True)
                if all(c == 0 for c in codes):
                    results.setdefault((tool, n), []).append(wall)
    for n in a.nodes:
        d, t = results.get(("dlaunch", n), []), results.get(("torchrun", n), [])
        if d and t:
            print(json.dumps({"nodes": n, "dlaunch_median_s": round(statistics.median(d), 3),
                              "dlaunch_range_s": [round(min(d), 3), round(max(d), 3)],
                              "torchrun_median_s": round(statistics.median(t), 3),
                              "torchrun_range_s": [round(min(t), 3), round(max(t), 3)],
                              "ratio": round(statistics.median(d) / statistics.median(t), 3)}))


if __name__ == "__main__":
    main()
