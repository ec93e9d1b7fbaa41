#!/usr/bin/python3
"""Side-by-side on Fashion-MNIST: `dlaunch --nproc N train` against PyTorch DDP (fmnist_ddp.py,
the same model, data order and hyper-parameters) under Debian's torchrun.

  /usr/bin/python3 benchmarks/train/compare_fmnist.py --dlaunch build/launcher/dlaunch \
      --nprocs 1 2 4 --epochs 2 --repeat 1

For every rank count it runs both (alternating) and reports the test accuracy after each epoch,
the time from launch to the first evaluation at or above --target (0.90), the whole run's wall
time and the median step time. Then, at 4 ranks, dlaunch with memory checkpoints off, at the
default sampling and at every step: step time and the time spent taking them. Prints Markdown.
"""
import argparse
import glob
import json
import os
import socket
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare import run  # noqa: E402  (runs a command, exits with its output on failure)


def events(logs, kind):
    files = glob.glob(os.path.join(logs, "*", "rank0", "events.jsonl"))
    if not files:
        sys.exit("no rank0/events.jsonl under " + logs)
    with open(files[0]) as f:
        return [e for e in map(json.loads, f) if e.get("kind") == kind]


def time_to(evals, start_ms, target):
    for e in evals:
        if e["test_accuracy"] >= target:
            return (e["unix_ms"] - start_ms) / 1000
    return None


def dlaunch(a, n, env):
    with tempfile.TemporaryDirectory() as logs:
        start = time.time()
        run([a.dlaunch, "--nproc", str(n), "--log-dir", logs, "train", "--data-dir", a.data_dir,
             "--model", "cnn", "--epochs", str(a.epochs), "--no-preflight", "--quiet"], env)
        wall = time.time() - start
        evals = events(logs, "eval")
        done = [e for e in events(logs, "telemetry") if e.get("phase") == "done"][-1]
    return {"acc": [e["test_accuracy"] for e in evals],
            "t_target": time_to(evals, start * 1000, a.target), "wall": wall,
            "step_ms": done["step_ms_median"]}


def free_port():
    # torchrun's default 29500 may be taken by another job on a shared machine.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pytorch(a, n, env):
    with tempfile.TemporaryDirectory() as logs:
        start = time.time()
        out = run(["/usr/bin/torchrun", "--nproc_per_node", str(n), "--master_port",
                   str(free_port()), "--redirects", "1", "--tee", "1", "--log_dir", logs, os.path.join(HERE, "fmnist_ddp.py"), "--epochs",
                   str(a.epochs), "--data-dir", a.data_dir], env)
        wall = time.time() - start
    lines = [json.loads(l[l.find('{"impl"'):]) for l in out.splitlines() if '{"impl"' in l]
    evals = [e for e in lines if e["event"] == "eval"]
    done = [e for e in lines if e["event"] == "done"][-1]
    return {"acc": [e["test_accuracy"] for e in evals],
            "t_target": time_to(evals, start * 1000, a.target), "wall": wall,
            "step_ms": done["step_ms_median"]}


def memory_overhead(a, env, every):
    with tempfile.TemporaryDirectory() as logs:
        run([a.dlaunch, "--nproc", "4", "--log-dir", logs, "train", "--data-dir", a.data_dir,
             "--steps", str(a.memory_steps), "--memory-every", str(every), "--no-preflight",
             "--quiet"], env)
        done = [e for e in events(logs, "telemetry") if e.get("phase") == "done"][-1]
    return done["step_ms_median"], done["memory_checkpoint_ms"] / done["train_ms"]


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dlaunch", required=True)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--nprocs", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--target", type=float, default=0.90)
    p.add_argument("--memory-steps", type=int, default=300)
    p.add_argument("--memory-repeat", type=int, default=3)
    p.add_argument("--skip-memory", action="store_true")
    a = p.parse_args()
    env = dict(os.environ)

    rows = []
    for n in a.nprocs:
        d_runs, p_runs = [], []
        for _ in range(a.repeat):
            d_runs.append(dlaunch(a, n, env))
            print("dlaunch  %d ranks: %s" % (n, json.dumps(d_runs[-1])), file=sys.stderr)
            p_runs.append(pytorch(a, n, env))
            print("pytorch  %d ranks: %s" % (n, json.dumps(p_runs[-1])), file=sys.stderr)
        rows.append((n, d_runs, p_runs))

    def med(runs, key):
        vals = [r[key] for r in runs if r[key] is not None]
        return statistics.median(vals) if len(vals) == len(runs) else None

    print("| ranks | epoch | dlaunch test acc | PyTorch test acc | difference (points) |")
    print("| --- | --- | --- | --- | --- |")
    for n, d_runs, p_runs in rows:
        for e in range(a.epochs):
            da = statistics.median(r["acc"][e] for r in d_runs)
            pa = statistics.median(r["acc"][e] for r in p_runs)
            print("| %d | %d | %.4f | %.4f | %+.2f |" % (n, e + 1, da, pa, 100 * (da - pa)))
    print()
    print("| ranks | dlaunch time to %.2f (s) | PyTorch time to %.2f (s) | ratio | dlaunch wall (s) "
          "| PyTorch wall (s) | dlaunch step ms | PyTorch step ms | step ratio |"
          % (a.target, a.target))
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for n, d_runs, p_runs in rows:
        dt, pt = med(d_runs, "t_target"), med(p_runs, "t_target")
        ds, ps = med(d_runs, "step_ms"), med(p_runs, "step_ms")
        print("| %d | %s | %s | %s | %.1f | %.1f | %.2f | %.2f | %.2fx |" % (
            n, fmt(dt, ".1f"), fmt(pt, ".1f"), fmt(dt / pt if dt and pt else None, ".2f") + "x",
            med(d_runs, "wall"), med(p_runs, "wall"), ds, ps, ds / ps))
    if a.skip_memory:
        return
    print()
    results = {0: [], 50: [], 1: []}
    for _ in range(a.memory_repeat):
        for every in results:
            results[every].append(memory_overhead(a, env, every))
            print("memory-every %d: %s" % (every, results[every][-1]), file=sys.stderr)
    off = statistics.median(r[0] for r in results[0])
    print("| 4 ranks, %d steps, median of %d | step ms | vs off | time in memory checkpoints |"
          % (a.memory_steps, a.memory_repeat))
    print("| --- | --- | --- | --- |")
    for every, label in [(0, "off (`--memory-every 0`)"), (50, "default (`--memory-every 50`)"),
                         (1, "every step (`--memory-every 1`)")]:
        s = statistics.median(r[0] for r in results[every])
        share = statistics.median(r[1] for r in results[every])
        print("| %s | %.2f | %+.1f%% | %.3f%% |" % (label, s, 100 * (s / off - 1), 100 * share))
    print("\nraw: " + json.dumps(rows) + " " + json.dumps(results), file=sys.stderr)


if __name__ == "__main__":
    main()
