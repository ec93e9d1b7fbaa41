#!/usr/bin/env python3
"""Straggler detection, measured: how often and how soon a slowed rank is named, and how often a
healthy job is named at all. Each case runs a 2-rank job RUNS times, one job at a time, and reads
the verdicts from the run's summary.json ("stragglers").

    benchmarks/straggler/run.py BUILD_DIR [--runs 10] [--cases train,python,healthy-train,healthy-python]

  train           dlaunch --nproc 2 train (C++ ranks), rank 1 sleeps 150 ms per step, 60 steps
  python          a PyTorch DDP script on Gloo (tests/python/scripts/ddp_straggler.py), rank 1
                  sleeps 150 ms per step, 70 steps, /usr/bin/python3 (torch 1.13)
  healthy-train   dlaunch --nproc 2 train --model cnn, no slowed rank, 300 steps
  healthy-python  the DDP script, no slowed rank, 300 steps

Prints one line per run and a summary line per case: named in how many runs within 50 steps,
the step it was named at (median, range), and the verdicts of healthy runs.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = ("train --data synthetic --model mlp --features 16 --hidden 32 --classes 4 --samples 512 "
         "--batch-size 16 --no-preflight --quiet")
SCRIPT = os.path.join(ROOT, "tests", "python", "scripts", "ddp_straggler.py")


def command(build, case, log_dir):
    dlaunch = os.path.join(build, "launcher", "dlaunch")
    head = [dlaunch, "--log-dir", log_dir, "--run-id", "run", "--skip-doctor", "--nproc", "2"]
    if case == "train":
        return head + shlex.split(TRAIN) + ["--steps", "60", "--slow-rank", "1", "--slow-ms", "150"]
    if case == "healthy-train":
        # The CNN: ~25 ms steps, so 300 steps span several heartbeats and every rank is judged
        # (the MLP's 300 steps take one second, too short for a verdict either way).
        cnn = TRAIN.replace("--model mlp --features 16 --hidden 32 --classes 4 --samples 512 "
                            "--batch-size 16", "--model cnn --batch-size 32")
        return head + shlex.split(cnn) + ["--steps", "300"]
    if case == "python":
        return head + ["--python", "/usr/bin/python3", "--", SCRIPT, "70", "1", "150"]
    if case == "healthy-python":
        return head + ["--python", "/usr/bin/python3", "--", SCRIPT, "300", "-1", "0"]
    raise SystemExit("unknown case " + case)


def run_once(build, case):
    with tempfile.TemporaryDirectory(prefix="dlaunch-strag-") as tmp:
        argv = command(build, case, tmp)
        t0 = time.monotonic()
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wall = time.monotonic() - t0
        try:
            with open(os.path.join(tmp, "run", "summary.json")) as f:
                summary = json.load(f)
        except (OSError, ValueError) as e:
            summary = {"error": str(e)}
        return p.returncode, wall, summary.get("stragglers", []), p.stdout, argv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--cases", default="train,python,healthy-train,healthy-python")
    args = ap.parse_args()
    for case in args.cases.split(","):
        print("== %s: %s" % (case, " ".join(command(args.build, case, "LOGS"))), flush=True)
        named, steps, verdicts, failed = 0, [], 0, 0
        for i in range(args.runs):
            code, wall, stragglers, out, _ = run_once(args.build, case)
            failed += code != 0
            verdicts += len(stragglers)
            first = [v for v in stragglers if v.get("rank") == 1]
            step = first[0].get("start_step", -1) if first else None
            if step is not None and 0 <= step <= 50:
                named += 1
                steps.append(step)
            desc = "; ".join("rank %s at step %s, %.2fx, last %.0f%%" % (
                v.get("rank"), v.get("start_step"), v.get("relative", 0),
                100 * max(v.get("last_share", -1), 0)) for v in stragglers) or "no verdict"
            print("  run %2d: exit %d, %.1f s, %s" % (i + 1, code, wall, desc), flush=True)
            if code != 0:
                print("    " + out[-2000:].replace("\n", "\n    "))
        if case.startswith("healthy"):
            print("  %s: %d verdicts in %d runs (%d runs exited non-zero)" %
                  (case, verdicts, args.runs, failed), flush=True)
        else:
            span = ("step median %g, range %d-%d" %
                    (statistics.median(steps), min(steps), max(steps))) if steps else "never named"
            print("  %s: rank 1 named within 50 steps in %d of %d runs, %s; %d verdicts in all "
                  "(%d runs exited non-zero)" % (case, named, args.runs, span, verdicts, failed),
                  flush=True)


if __name__ == "__main__":
    sys.exit(main())
