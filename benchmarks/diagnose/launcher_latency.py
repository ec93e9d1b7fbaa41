#!/usr/bin/env python3
"""Hang detection latency through the real launcher: N runs of each injected fault.

Each run launches 4 ranks of tests/diagnose/diagnose_fault_rank (gloo all-reduces, flight
recorder, DUMP handling) or a Python script without libdlaunch, injects one fault, and reads the
diagnosis the launcher wrote. Latency = diagnosis.json's created_unix_ms minus the moment of the
fault (the faulty rank's telemetry, or the harness's kill(SIGSTOP)).

  benchmarks/diagnose/launcher_latency.py --dlaunch build/launcher/dlaunch \
      --fault-rank build/tests/diagnose/diagnose_fault_rank --runs 20 --hang-timeout 2
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

PY_HANG = """import os, sys, time
rank = int(os.environ['RANK'])
for step in range(100000):
    if rank == 1 and step == 5:
        print('FAULT %d' % int(time.time() * 1000), file=sys.stderr, flush=True)
        time.sleep(3600)
    print('rank %d step %d' % (rank, step), flush=True)
    time.sleep(0.05)
    if rank != 1 and step == 6:
        r, w = os.pipe(); os.read(r, 1)
"""


def read_json(path):
    with open(path) as f:
        return json.load(f)


def events(run_dir, rank):
    out = []
    try:
        with open(os.path.join(run_dir, "rank%d" % rank, "events.jsonl")) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    except OSError:
        pass
    return out


def find_pid(run_dir, rank):
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if (b"DLAUNCH_RUN_DIR=" + run_dir.encode()) in env and (b"RANK=%d" % rank) in env:
            return int(pid)
    return None


def run_once(args, fault, tmp, i):
    log_dir = os.path.join(tmp, "logs")
    run_id = "%s-%d" % (fault, i)
    run_dir = os.path.realpath(os.path.join(log_dir, run_id))
    cmd = [args.dlaunch, "--log-dir", log_dir, "--run-id", run_id, "--quiet",
           "--grace-period", "2", "--hang-timeout", str(args.hang_timeout)]
    fault_ms = None
    if fault == "never_entered":
        cmd += ["--nproc", "4", "--env", "DIAG_FAULT=never_entered",
                "--env", "DIAG_TIMEOUT_MS=600000", "--", args.fault_rank]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        for e in events(run_dir, 2):
            if e.get("kind") == "telemetry" and e.get("step") == 5 and e.get("phase") == "data":
                fault_ms = e["unix_ms"]
    elif fault == "sigstop":
        cmd += ["--nproc", "4", "--heartbeat-timeout", str(args.heartbeat_timeout),
                "--env", "DIAG_STEPS=10000000", "--env", "DIAG_TIMEOUT_MS=600000",
                "--", args.fault_rank]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        pid = None
        deadline = time.time() + 60
        while time.time() < deadline and fault_ms is None:
            pid = pid or find_pid(run_dir, 2)
            if pid and any(e.get("step", 0) >= 10 for e in events(run_dir, 2)):
                os.kill(pid, signal.SIGSTOP)
                fault_ms = int(time.time() * 1000)
            time.sleep(0.02)
        proc.communicate(timeout=300)
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    else:  # unlinked python
        script = os.path.join(tmp, "hang.py")
        with open(script, "w") as f:
            f.write(PY_HANG)
        cmd += ["--nproc", "3", "--", sys.executable, script]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        try:
            with open(os.path.join(run_dir, "rank1", "stderr.log")) as f:
                for line in f:
                    if line.startswith("FAULT "):
                        fault_ms = int(line.split()[1])
        except OSError:
            pass
    expected = 1 if fault == "unlinked_python" else 2
    try:
        d = read_json(os.path.join(run_dir, "diagnosis.json"))
    except (OSError, ValueError):
        return None
    if fault_ms is None or not d.get("created_unix_ms"):
        return None
    return {"latency_ms": d["created_unix_ms"] - fault_ms,
            "culprit_ok": d.get("culprit_ranks") == [expected],
            "headline": d.get("headline", "")}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dlaunch", required=True)
    p.add_argument("--fault-rank", required=True)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--hang-timeout", type=float, default=2)
    p.add_argument("--heartbeat-timeout", type=float, default=2)
    p.add_argument("--faults", default="never_entered,sigstop,unlinked_python")
    p.add_argument("--out")
    args = p.parse_args()
    report = {}
    print("%-16s %5s %8s %9s %9s %9s %9s" % ("fault", "runs", "culprit", "min_ms",
                                             "median_ms", "p95_ms", "max_ms"))
    for fault in args.faults.split(","):
        results = []
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.runs):
                r = run_once(args, fault, tmp, i)
                if r:
                    results.append(r)
        lat = sorted(r["latency_ms"] for r in results)
        ok = sum(r["culprit_ok"] for r in results)
        if not lat:
            print("%-16s no diagnosis" % fault)
            continue
        p95 = lat[min(len(lat) - 1, int(round(0.95 * (len(lat) - 1))))]
        print("%-16s %2d/%-2d %5d/%-2d %9d %9d %9d %9d" % (
            fault, len(results), args.runs, ok, args.runs, lat[0], statistics.median(lat), p95,
            lat[-1]), flush=True)
        report[fault] = {"runs": args.runs, "diagnosed": len(results), "culprit_ok": ok,
                         "latency_ms": {"min": lat[0], "median": statistics.median(lat),
                                        "p95": p95, "max": lat[-1]},
                         "example_headline": results[0]["headline"]}
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"hang_timeout_s": args.hang_timeout,
                       "heartbeat_timeout_s": args.heartbeat_timeout, "faults": report}, f,
                      indent=2)


if __name__ == "__main__":
    main()
