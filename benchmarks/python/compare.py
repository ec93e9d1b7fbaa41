#!/usr/bin/env python3
"""The Python rank agent's cost and worth, side by side in one run:

0. the flight recorder's own cost per call, with and without flight_tail.jsonl.
1. overhead: ddp_fmnist.py (PyTorch DDP, or FSDP2 with --wrap fsdp2; gloo, CPU) under dlaunch with the agent on and off
   (--no-python-agent), interleaved (on/off, then off/on, ...), rank 0's median step time of
   each run; reported: median over runs per side, the spread, and the paired on/off ratios.
2. hang to diagnosis: hang.py (rank 1 stops at step 5, the others block in all_reduce #5) under
   dlaunch --hang-timeout H (time from rank 1's FAULT line to diagnosis.json's created_unix_ms
   and to dlaunch's exit, the culprit named), and under torchrun with the process group's gloo
   timeout set to T (time from FAULT to torchrun's exit, the rank its report names).

  flock /tmp/dlaunch-bench.lock benchmarks/python/compare.py --dlaunch build/launcher/dlaunch
  flock /tmp/dlaunch-bench.lock benchmarks/python/compare.py --dlaunch build/launcher/dlaunch \
      --python .venv-torch2/bin/python --wrap fsdp2 --skip-hang
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def spread(values):
    return "%.3f (%.3f-%.3f)" % (statistics.median(values), min(values), max(values))


def run_ddp(dlaunch, nproc, agent, logs, run_id, env):
    argv = [dlaunch, "--log-dir", logs, "--run-id", run_id, "--python", PYTHON,
            "--nproc", str(nproc), "--quiet"]
    if not agent:
        argv.append("--no-python-agent")
    argv.append(os.path.join(HERE, "ddp_fmnist.py"))
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    out = read(os.path.join(logs, run_id, "rank0", "stdout.log"))
    m = re.search(r"STEP_MS median=([\d.]+).*cpu_ms=([\d.]+)", out)
    if p.returncode != 0 or not m:
        sys.exit("ddp run failed (%d): %s %s" % (p.returncode, out[-500:], p.stderr[-2000:]))
    return float(m.group(1)), float(m.group(2))


def overhead(args, logs):
    env = dict(os.environ, STEPS=str(args.steps), WRAP=args.wrap)
    on, off = {"wall": [], "cpu": []}, {"wall": [], "cpu": []}
    for i in range(args.repeat):
        pair = {}
        for agent in ((True, False) if i % 2 == 0 else (False, True)):
            pair[agent] = run_ddp(args.dlaunch, args.nproc, agent, logs,
                                  "ddp-%d-%s" % (i, "on" if agent else "off"), env)
        for k, side in ((0, "wall"), (1, "cpu")):
            on[side].append(pair[True][k])
            off[side].append(pair[False][k])
        print("repeat %d: agent on %.3f ms (cpu %.3f), off %.3f ms (cpu %.3f)" %
              (i, pair[True][0], pair[True][1], pair[False][0], pair[False][1]), flush=True)
    print()
    print("| %s, %d ranks, %d steps, batch 32, %d runs each | median step (ms): median (min-max) "
          "| CPU time per step (ms): median (min-max) |" %
          ("FSDP2" if args.wrap == "fsdp2" else "DDP", args.nproc, args.steps, args.repeat))
    print("| --- | --- | --- |")
    print("| agent on | %s | %s |" % (spread(on["wall"]), spread(on["cpu"])))
    print("| agent off (--no-python-agent) | %s | %s |" % (spread(off["wall"]), spread(off["cpu"])))
    ratios = {side: [a / b for a, b in zip(on[side], off[side])] for side in on}
    print("| on/off, paired | %s | %s |" % (spread(ratios["wall"]), spread(ratios["cpu"])))
    for side in ("wall", "cpu"):
        print("overhead (%s): %+.2f%% (median of medians), paired ratio median %+.2f%%" %
              (side, (statistics.median(on[side]) / statistics.median(off[side]) - 1) * 100,
               (statistics.median(ratios[side]) - 1) * 100))


def recorder_cost(args, logs):
    """The agent's own cost per recorded call (record + complete), with and without the tail
    file, measured in this process: no torch, the same code the rank runs."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
    from dlaunch._recorder import FlightRecorder

    results = {}
    for tail in (False, True, False, True, False, True):
        rec = FlightRecorder(0, 2)
        if tail:
            rec.open_tail(os.path.join(logs, "flight_tail.jsonl"))
        n = args.recorder_calls
        t = time.perf_counter()
        for i in range(n):
            e = rec.record("allreduce", "0", "float", 65536, [65536], 262144,
                           call_site="train.py:42 train_step")
            rec.complete(e)
        results.setdefault(tail, []).append((time.perf_counter() - t) / n * 1e6)
    print("| recorder, per call (record + complete) | us: median (min-max) of 3 |")
    print("| --- | --- |")
    print("| flight recorder only | %s |" % spread(results[False]))
    print("| with flight_tail.jsonl (2 slot writes) | %s |" % spread(results[True]))
    print()


def fault_ms(text):
    m = re.search(r"FAULT (\d+)", text)
    return int(m.group(1)) if m else None


def hang_dlaunch(args, logs):
    diag, exits, named = [], [], 0
    for i in range(args.hang_runs):
        run_id = "hang-%d" % i
        argv = [args.dlaunch, "--log-dir", logs, "--run-id", run_id, "--python", PYTHON,
                "--nproc", "3", "--quiet", "--hang-timeout", str(args.hang_timeout),
                os.path.join(HERE, "hang.py")]
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
        end = int(time.time() * 1000)
        run = os.path.join(logs, run_id)
        fault = fault_ms(read(os.path.join(run, "rank1", "stderr.log")))
        d = json.loads(read(os.path.join(run, "diagnosis.json")) or "{}")
        if fault is None or not d:
            sys.exit("hang run %d: no FAULT line or no diagnosis (exit %d)" % (i, p.returncode))
        diag.append((d["created_unix_ms"] - fault) / 1000)
        exits.append((end - fault) / 1000)
        named += d.get("culprit_ranks") == [1] and p.returncode == 3
        print("dlaunch hang %d: diagnosis after %.2f s, exit after %.2f s, culprit %s, exit %d" %
              (i, diag[-1], exits[-1], d.get("culprit_ranks"), p.returncode), flush=True)
    return diag, exits, named


def hang_torchrun(args):
    exits, names = [], []
    for i in range(args.torchrun_runs):
        env = dict(os.environ, GLOO_TIMEOUT_S=str(args.torchrun_timeout))
        argv = [PYTHON, "-m", "torch.distributed.run", "--nproc_per_node", "3",
                "--standalone", "--redirects", "1", "--tee", "1",
                os.path.join(HERE, "hang.py")]
        # Rank 1 sleeps for an hour: torchrun ends when the others' gloo timeout fires.
        # (Debian's torch 1.13 torchrun needs --redirects/--tee given under Python 3.11.)
        p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=args.torchrun_timeout + 300, text=True, errors="replace")
        end = int(time.time() * 1000)
        fault = fault_ms(p.stderr)
        root = re.search(r"Root Cause.*?rank\s*:\s*(\d+)", p.stderr, re.S)
        exits.append((end - fault) / 1000 if fault else float("nan"))
        names.append(int(root.group(1)) if root else None)
        print("torchrun hang %d: exit %d after %.2f s, root cause names rank %s" %
              (i, p.returncode, exits[-1], names[-1]), flush=True)
    return exits, names


def main():
    global PYTHON
    ap = argparse.ArgumentParser()
    ap.add_argument("--dlaunch", required=True)
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--hang-runs", type=int, default=5)
    ap.add_argument("--hang-timeout", type=float, default=5)
    ap.add_argument("--torchrun-runs", type=int, default=2)
    ap.add_argument("--torchrun-timeout", type=int, default=30)
    ap.add_argument("--skip-overhead", action="store_true")
    ap.add_argument("--skip-hang", action="store_true")
    ap.add_argument("--wrap", choices=("ddp", "fsdp2"), default="ddp",
                    help="the overhead's training step: DDP, or FSDP2's fully_shard (torch 2.x)")
    ap.add_argument("--recorder-calls", type=int, default=50000)
    ap.add_argument("--python", default=PYTHON,
                    help="the ranks' interpreter (and torchrun's): e.g. the torch 2.x venv's")
    args = ap.parse_args()
    PYTHON = args.python
    args.dlaunch = os.path.abspath(args.dlaunch)
    with tempfile.TemporaryDirectory(prefix="dlaunch-pybench-") as logs:
        recorder_cost(args, logs)
        if not args.skip_overhead:
            overhead(args, logs)
        if args.skip_hang:
            return
        diag, exits, named = hang_dlaunch(args, logs)
    t_exits, t_names = hang_torchrun(args) if args.torchrun_runs else ([], [])
    print()
    print("| hang of rank 1 at all_reduce #5, 3 ranks | fault to report: median (min-max) | "
          "names rank 1 |")
    print("| --- | --- | --- |")
    print("| dlaunch --hang-timeout %g: diagnosis | %s s | %d/%d |" %
          (args.hang_timeout, spread(diag), named, len(diag)))
    print("| dlaunch --hang-timeout %g: exit | %s s | |" % (args.hang_timeout, spread(exits)))
    if t_exits:
        print("| torchrun, gloo timeout %d s: exit | %s s | %d/%d (names rank %s) |" %
              (args.torchrun_timeout, spread(t_exits), sum(n == 1 for n in t_names),
               len(t_names), ",".join(str(n) for n in t_names)))


if __name__ == "__main__":
    main()
