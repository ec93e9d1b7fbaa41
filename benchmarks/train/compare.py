#!/usr/bin/python3
"""Side-by-side: `dlaunch --nproc N train` against PyTorch DDP (gloo) under Debian's torchrun.

  /usr/bin/python3 benchmarks/train/compare.py --dlaunch build/launcher/dlaunch \
      --model mlp --steps 300 --batch-size 32 --nprocs 1 2 4 --repeat 3

For every rank count it runs both implementations `--repeat` times, alternating, with the same
model, data shape, per-rank batch, steps, optimizer and bucket size, and takes each run's median
step time (the slowest rank's for PyTorch; rank 0's for dlaunch, whose steps are in lockstep).
At the largest rank count it also runs dlaunch with heartbeats off, at the default 1 s and at
0.1 s (ten times the default rate): step times on vs off, and the time rank 0 spent inside
telemetry as a share of training time (measured directly, so it is not lost in run-to-run noise).
Prints Markdown tables.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, env):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.exit("failed (%d): %s\n%s" % (p.returncode, " ".join(cmd), p.stdout[-4000:]))
    return p.stdout


def common_args(a):
    return ["--model", a.model, "--steps", str(a.steps), "--batch-size", str(a.batch_size),
            "--samples", str(a.samples)]


def pytorch(a, n, env):
    with tempfile.TemporaryDirectory() as logs:
        out = run(["/usr/bin/torchrun", "--nproc_per_node", str(n), "--redirects", "1", "--tee",
                   "1", "--log_dir", logs, os.path.join(HERE, "ddp_bench.py")] + common_args(a),
                  env)
    for line in out.splitlines():
        i = line.find('{"impl"')
        if i >= 0:
            return json.loads(line[i:])["step_ms_median"]
    sys.exit("no result from ddp_bench.py:\n" + out[-4000:])


def dlaunch(a, n, env, heartbeat):
    # `dlaunch train` runs dlaunch-worker; --worker names it explicitly (program mode) for a
    # dlaunch built without the train built-in.
    train = ["--", a.worker, "train"] if a.worker else ["train"]
    with tempfile.TemporaryDirectory() as logs:
        run([a.dlaunch, "--nproc", str(n), "--log-dir", logs] + train + common_args(a) +
            ["--heartbeat-interval", str(heartbeat), "--no-preflight", "--data", "synthetic",
             "--weight-decay", "0", "--lr-schedule", "none", "--warmup-steps", "0"], env)
        files = glob.glob(os.path.join(logs, "*", "rank0", "events.jsonl"))
        if not files:
            sys.exit("no rank0/events.jsonl under " + logs)
        result = None
        with open(files[0]) as f:
            for line in f:
                e = json.loads(line)
                if e.get("kind") == "telemetry" and e.get("phase") == "done":
                    result = e
        if result is None:
            sys.exit("no closing telemetry event in " + files[0])
        return result


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dlaunch", default="build/launcher/dlaunch")
    p.add_argument("--worker", default="",
                   help="path of dlaunch-worker: run `dlaunch -- WORKER train` instead of "
                   "`dlaunch train`")
    p.add_argument("--model", default="mlp")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--samples", type=int, default=8192)
    p.add_argument("--nprocs", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS="1")

    rows = []
    for n in a.nprocs:
        ours, theirs, shares = [], [], []
        for _ in range(a.repeat):
            r = dlaunch(a, n, env, 1.0)
            ours.append(r["step_ms_median"])
            shares.append(r.get("comm_share", 0))
            theirs.append(pytorch(a, n, env))
        rows.append((n, statistics.median(ours), statistics.median(theirs),
                     statistics.median(shares)))
        print("nproc %d: dlaunch %s ms, pytorch %s ms" % (n, ours, theirs), file=sys.stderr)

    print("| ranks | dlaunch step ms (median) | PyTorch DDP step ms | ratio | dlaunch comm share "
          "| dlaunch scaling (samples/s vs 1 rank) | PyTorch scaling |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    base_ours, base_theirs = rows[0][1], rows[0][2]
    n0 = rows[0][0]
    for n, ours, theirs, share in rows:
        print("| %d | %.3f | %.3f | %.2fx | %.1f%% | %.2fx | %.2fx |" %
              (n, ours, theirs, ours / theirs, 100 * share, (n / ours) / (n0 / base_ours),
               (n / theirs) / (n0 / base_theirs)))

    n = a.nprocs[-1]
    runs = {0: [], 1.0: [], 0.1: []}
    for _ in range(a.repeat):
        for hb in runs:
            runs[hb].append(dlaunch(a, n, env, hb))

    def med(hb):
        return statistics.median(r["step_ms_median"] for r in runs[hb])

    def measured(hb):
        # Time spent producing telemetry over the run's training time, on rank 0 (which also
        # reads the other ranks' step times from the store and prints the progress line).
        return statistics.median(100 * r["telemetry_ms"] / r["train_ms"] for r in runs[hb])

    print()
    print("| %d ranks, median of %d runs | step ms | vs off | time inside telemetry (rank 0) |"
          % (n, a.repeat))
    print("| --- | --- | --- | --- |")
    print("| heartbeats off (--heartbeat-interval 0) | %.3f | - | %.3f%% |" % (med(0), measured(0)))
    for hb, label in ((1.0, "every 1 s (default)"), (0.1, "every 0.1 s")):
        print("| heartbeats %s | %.3f | %+.1f%% | %.3f%% |" %
              (label, med(hb), 100 * (med(hb) / med(0) - 1), measured(hb)))
    print("raw step ms: " + json.dumps({str(k): [r["step_ms_median"] for r in v]
                                        for k, v in runs.items()}), file=sys.stderr)


if __name__ == "__main__":
    main()
