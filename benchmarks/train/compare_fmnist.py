#!/usr/bin/python3
"""Side-by-side on Fashion-MNIST: `dlaunch --nproc N train` against PyTorch DDP (fmnist_ddp.py,
the same model, data order and hyper-parameters) under Debian's torchrun.

  flock /tmp/dlaunch-bench.lock /usr/bin/python3 benchmarks/train/compare_fmnist.py \
      --dlaunch build/launcher/dlaunch --nprocs 1 2 4 --epochs 2 --repeat 3

For every rank count it runs both `--repeat` times (alternating) and reports the test accuracy
after each epoch, the time from launch to the first evaluation at or above --target (0.90), the
whole run's wall time, the median step time and the samples/s it implies (ranks x per-rank batch
/ step time, the same formula for both), each as the median of the runs with the range (min-max)
beside it, and the 1-minute load average around the runs (the host may be shared). Then, at 4
ranks, dlaunch with memory checkpoints off, at the default sampling and at every step, the three
alternating: step time and the time spent taking them. Prints Markdown. With --results FILE
every run is appended to FILE and the tables cover all runs in it, so a measurement can be split
into several invocations (`--nprocs` with no value: memory checkpoints only); --report prints
the tables of FILE without running anything. Each PyTorch side is reported twice: against its runs
whose ranks had as many intra-op threads as dlaunch's (`--pytorch-threads N` sets OMP_NUM_THREADS
for them: the same arithmetic), and against its runs with torchrun's default threads.
"""
import argparse
import glob
import json
import os
import re
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


def load():
    return os.getloadavg()[0]


def dlaunch(a, n, env):
    with tempfile.TemporaryDirectory() as logs:
        load0, start = load(), time.time()
        # The launcher's --quiet: rank 0's progress goes to its stdout.log only.
        run([a.dlaunch, "--nproc", str(n), "--log-dir", logs, "--quiet", "train", "--data-dir",
             a.data_dir, "--model", "cnn", "--epochs", str(a.epochs), "--no-preflight"], env)
        wall = time.time() - start
        evals = events(logs, "eval")
        done = [e for e in events(logs, "telemetry") if e.get("phase") == "done"][-1]
        threads = None
        for path in glob.glob(os.path.join(logs, "*", "rank0", "stdout.log")):
            with open(path) as f:
                m = re.search(r"\((\d+) CPU threads? each\)", f.read())
            threads = int(m.group(1)) if m else None
    return {"acc": [e["test_accuracy"] for e in evals], "threads": threads,
            "t_target": time_to(evals, start * 1000, a.target), "wall": wall,
            "step_ms": done["step_ms_median"],
            "samples_s": n * a.batch_size * 1000 / done["step_ms_median"],
            "load": (load0 + load()) / 2}


def free_port():
    # torchrun's default 29500 may be taken by another job on a shared machine.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pytorch(a, n, env):
    with tempfile.TemporaryDirectory() as logs:
        load0, start = load(), time.time()
        out = run(["/usr/bin/torchrun", "--nproc_per_node", str(n), "--master_port",
                   str(free_port()), "--redirects", "1", "--tee", "1", "--log_dir", logs, os.path.join(HERE, "fmnist_ddp.py"), "--epochs",
                   str(a.epochs), "--data-dir", a.data_dir, "--linear-kernel",
                   a.pytorch_linear_kernel], env)
        wall = time.time() - start
    lines = [json.loads(l[l.find('{"impl"'):]) for l in out.splitlines() if '{"impl"' in l]
    evals = [e for e in lines if e["event"] == "eval"]
    done = [e for e in lines if e["event"] == "done"][-1]
    return {"acc": [e["test_accuracy"] for e in evals], "threads": done.get("threads"),
            "t_target": time_to(evals, start * 1000, a.target), "wall": wall,
            "step_ms": done["step_ms_median"],
            "samples_s": n * a.batch_size * 1000 / done["step_ms_median"],
            "load": (load0 + load()) / 2}


def memory_overhead(a, env, every):
    with tempfile.TemporaryDirectory() as logs:
        run([a.dlaunch, "--nproc", "4", "--log-dir", logs, "train", "--data-dir", a.data_dir,
             "--steps", str(a.memory_steps), "--memory-every", str(every), "--no-preflight",
             "--quiet"], env)
        done = [e for e in events(logs, "telemetry") if e.get("phase") == "done"][-1]
    return done["step_ms_median"], done["memory_checkpoint_ms"] / done["train_ms"], load()


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def spread(runs, key, spec):
    """'median (min-max)' of the runs that have a value; '[k of n]' when some have none."""
    vals = [r[key] for r in runs if r[key] is not None]
    if not vals:
        return "-"
    out = format(statistics.median(vals), spec)
    if len(vals) > 1:
        out += " (%s-%s)" % (format(min(vals), spec), format(max(vals), spec))
    if len(vals) < len(runs):
        out += " [%d of %d]" % (len(vals), len(runs))
    return out


def record(a, rec, recs):
    recs.append(rec)
    print(json.dumps(rec), file=sys.stderr, flush=True)
    if a.results:
        with open(a.results, "a") as f:
            f.write(json.dumps(rec) + "\n")


def med(runs, key):
    vals = [r[key] for r in runs if r[key] is not None]
    return statistics.median(vals) if vals and len(vals) == len(runs) else None


def report(a, recs):
    # Each PyTorch side twice: runs whose ranks had as many intra-op threads as dlaunch's at that
    # rank count (the same arithmetic), and runs with torchrun's default (no --pytorch-threads).
    for impl, name in (("pytorch", "PyTorch"), ("pytorch_onednn", "PyTorch+oneDNN")):
        side_by_side(a, recs, impl, lambda r, threads: r.get("threads") == threads, name,
                     "as many threads as dlaunch's ranks")
        side_by_side(a, recs, impl, lambda r, threads: not r.get("omp"), name,
                     "torchrun's default threads")
    memory_table(recs)


def side_by_side(a, recs, other, pick, label, threads_label):
    """dlaunch against the runs of `other` (pytorch: nn.Linear; pytorch_onednn: dlaunch's linear
    kernel) for which pick(run, dlaunch's threads at that rank count) holds."""
    side = [r for r in recs if r.get("epochs") == a.epochs and r["impl"] in ("dlaunch", other)]
    rows = []
    for n in sorted({r["n"] for r in side}):
        ours = [r for r in side if r["n"] == n and r["impl"] == "dlaunch"]
        threads = statistics.median_low([r.get("threads") or 0 for r in ours]) if ours else 0
        rows.append((n, ours, [r for r in side
                               if r["n"] == n and r["impl"] == other and pick(r, threads)]))
    rows = [row for row in rows if row[1] and row[2]]
    if rows:
        print()
        print("dlaunch against %s, %s. Intra-op threads per rank (dlaunch / PyTorch): %s." % (
            label, threads_label, ", ".join("%d rank%s %s / %s" % (
                n, "" if n == 1 else "s", "/".join(sorted({str(r.get("threads")) for r in d})),
                "/".join(sorted({str(r.get("threads")) for r in p_}))) for n, d, p_ in rows)))
        print()
        print("| ranks | runs (each) | epoch | dlaunch test acc | %s test acc "
              "| difference (points) |" % label)
        print("| --- | --- | --- | --- | --- | --- |")
        for n, d_runs, p_runs in rows:
            for e in range(a.epochs):
                d = [{"a": r["acc"][e]} for r in d_runs]
                p_ = [{"a": r["acc"][e]} for r in p_runs]
                diff = 100 * (med(d, "a") - med(p_, "a"))
                print("| %d | %d / %d | %d | %s | %s | %+.2f |" % (
                    n, len(d_runs), len(p_runs), e + 1, spread(d, "a", ".4f"),
                    spread(p_, "a", ".4f"), diff))
        print()
        print("| ranks | dlaunch step ms | {0} step ms | step ratio | dlaunch samples/s "
              "| {0} samples/s | dlaunch time to {1:.2f} (s) | {0} time to {1:.2f} (s) | ratio "
              "| dlaunch wall (s) | {0} wall (s) | load avg |".format(label, a.target))
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for n, d_runs, p_runs in rows:
            dt, pt = med(d_runs, "t_target"), med(p_runs, "t_target")
            ds, ps = med(d_runs, "step_ms"), med(p_runs, "step_ms")
            loads = [r["load"] for r in d_runs + p_runs]
            print("| %d | %s | %s | %.2fx | %s | %s | %s | %s | %s | %s | %s | %.1f (%.1f-%.1f) |"
                  % (n, spread(d_runs, "step_ms", ".2f"), spread(p_runs, "step_ms", ".2f"),
                     ds / ps, spread(d_runs, "samples_s", ".0f"),
                     spread(p_runs, "samples_s", ".0f"), spread(d_runs, "t_target", ".1f"),
                     spread(p_runs, "t_target", ".1f"),
                     fmt(dt / pt if dt and pt else None, ".2f") + "x",
                     spread(d_runs, "wall", ".1f"), spread(p_runs, "wall", ".1f"),
                     statistics.median(loads), min(loads), max(loads)))


def memory_table(recs):
    mem = [r for r in recs if r["impl"] == "memory"]
    off = [r for r in mem if r["every"] == 0]
    if not off:
        return
    off_ms = statistics.median(r["step_ms"] for r in off)
    print()
    print("| 4 ranks, %d steps | runs | step ms (min-max) | vs off | time in memory checkpoints "
          "| load avg |" % mem[0]["steps"])
    print("| --- | --- | --- | --- | --- | --- |")
    for every, label in [(0, "off (`--memory-every 0`)"), (50, "default (`--memory-every 50`)"),
                         (1, "every step (`--memory-every 1`)")]:
        runs = [r for r in mem if r["every"] == every]
        if not runs:
            continue
        s = med(runs, "step_ms")
        print("| %s | %d | %s | %+.1f%% | %.3f%% | %s |" % (
            label, len(runs), spread(runs, "step_ms", ".2f"), 100 * (s / off_ms - 1),
            100 * med(runs, "share"), spread(runs, "load", ".1f")))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dlaunch", required=True)
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--nprocs", type=int, nargs="*", default=[1, 2, 4],
                   help="rank counts of the side by side; none: memory checkpoints only")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--target", type=float, default=0.90)
    p.add_argument("--batch-size", type=int, default=32,
                   help="the per-rank batch both use (the default of each), for samples/s")
    p.add_argument("--pytorch-linear-kernel", choices=["blas", "onednn"], default="blas",
                   help="fmnist_ddp.py's fully connected layers: blas (nn.Linear, the default) or "
                   "onednn (dlaunch's kernel: separates the kernel from the rest)")
    p.add_argument("--pytorch-threads", type=int, default=0,
                   help="OMP_NUM_THREADS for fmnist_ddp.py's ranks (0: torchrun's default, which "
                   "sets 1 for several ranks and leaves one rank to libtorch)")
    p.add_argument("--only", choices=["dlaunch", "pytorch"],
                   help="run one side only (to interleave the two over several invocations)")
    p.add_argument("--memory-steps", type=int, default=300)
    p.add_argument("--memory-repeat", type=int, default=3)
    p.add_argument("--skip-memory", action="store_true")
    p.add_argument("--results", help="append every run to this JSON-lines file; the tables then "
                   "cover all the runs in it (several invocations add up)")
    p.add_argument("--report", action="store_true", help="only print the tables of --results")
    a = p.parse_args()
    env = dict(os.environ)

    recs = []
    if a.results and os.path.exists(a.results):
        with open(a.results) as f:
            recs = [json.loads(l) for l in f if l.strip()]
    elif a.report:
        sys.exit("--report needs an existing --results FILE")
    if not a.report:
        for n in a.nprocs:
            for _ in range(a.repeat):
                if a.only != "pytorch":
                    record(a, dict(dlaunch(a, n, env), impl="dlaunch", n=n, epochs=a.epochs),
                           recs)
                if a.only != "dlaunch":
                    impl = "pytorch" if a.pytorch_linear_kernel == "blas" else "pytorch_onednn"
                    penv = dict(env, OMP_NUM_THREADS=str(a.pytorch_threads)) \
                        if a.pytorch_threads else env
                    record(a, dict(pytorch(a, n, penv), impl=impl, n=n, epochs=a.epochs,
                                   omp=a.pytorch_threads), recs)
        if not a.skip_memory:
            for _ in range(a.memory_repeat):
                for every in (0, 50, 1):
                    step_ms, share, load_avg = memory_overhead(a, env, every)
                    record(a, {"impl": "memory", "every": every, "steps": a.memory_steps,
                               "step_ms": step_ms, "share": share, "load": load_avg}, recs)
    report(a, recs)


if __name__ == "__main__":
    main()
