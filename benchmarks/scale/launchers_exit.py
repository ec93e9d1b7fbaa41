#!/usr/bin/env python3
"""How long the launchers of one job take to end, and how far behind node 0 the last one ends.

N launchers of P ranks of /bin/true meet on loopback (no --node-rank: the first to listen is
node 0), in one shared run directory (--shared, as on a shared file system under Slurm) or one
each. Each binary given runs ROUNDS times, interleaved round by round, and the script prints per
run the end-to-end time, node 0's exit and the last launcher's lag behind it, then the medians.

  benchmarks/scale/launchers_exit.py [--nodes 16] [--nproc 8] [--rounds 5] [--shared] \
      NAME=path/to/dlaunch [NAME=path/to/dlaunch ...]
"""
import argparse
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_run(binary, nodes, nproc, shared):
    root = tempfile.mkdtemp(prefix="dlaunch-exit-")
    endpoint = "127.0.0.1:%d" % free_port()
    env = dict(os.environ, DLAUNCH_JOB_TOKEN="launchers-exit-bench-0123456789")
    start = time.monotonic()
    procs = []
    for i in range(nodes):
        log_dir = os.path.join(root, "logs" if shared else "logs%d" % i)
        argv = [binary, "--nnodes", str(nodes), "--rdzv-endpoint", endpoint, "--nproc",
                str(nproc), "--log-dir", log_dir, "--run-id", "j", "--quiet", "/bin/true"]
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True))
    ended = [None] * nodes
    errs = [""] * nodes
    while any(e is None for e in ended):
        for i, p in enumerate(procs):
            if ended[i] is None and p.poll() is not None:
                ended[i] = time.monotonic() - start
        time.sleep(0.005)
    codes = []
    zero = None
    for i, p in enumerate(procs):
        errs[i] = p.stderr.read()
        codes.append(p.returncode)
        if "node 0, coordinator on" in errs[i]:
            zero = i
    shutil.rmtree(root, ignore_errors=True)
    if zero is None or any(codes):
        raise SystemExit("a run failed: exit codes %s" % codes)
    return max(ended), ended[zero], max(ended) - ended[zero]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--nproc", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shared", action="store_true")
    ap.add_argument("binaries", nargs="+", help="NAME=path")
    a = ap.parse_args()
    named = [b.split("=", 1) for b in a.binaries]
    results = {name: [] for name, _ in named}
    print("%d launchers x %d ranks of /bin/true, %s run directory" %
          (a.nodes, a.nproc, "one shared" if a.shared else "one per launcher"))
    for r in range(a.rounds):
        for name, path in named:
            total, zero, lag = one_run(path, a.nodes, a.nproc, a.shared)
            results[name].append((total, zero, lag))
            print("round %d %-8s end-to-end %.2f s, node 0 exits at %.2f s, last launcher %.2f s "
                  "after it" % (r, name, total, zero, lag), flush=True)
    for name, rows in results.items():
        cols = list(zip(*rows))
        print("median %-8s end-to-end %.2f s (%.2f-%.2f), lag behind node 0 %.2f s (%.2f-%.2f)" %
              (name, statistics.median(cols[0]), min(cols[0]), max(cols[0]),
               statistics.median(cols[2]), min(cols[2]), max(cols[2])))


if __name__ == "__main__":
    main()
