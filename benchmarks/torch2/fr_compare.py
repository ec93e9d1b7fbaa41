#!/usr/bin/env python3
"""torch's fr_trace and `dlaunch diagnose` on the same run directories (BENCHMARKS.md, "torch 2.x").

    fr_compare.py --dlaunch build/launcher/dlaunch --python .venv-torch2/bin/python RUN_DIR...
    fr_compare.py --dlaunch ... --python ... --generate 1024 --repeat 3 --out /tmp/fr1024

For each run directory, the ranks' torch_trace_<R> (torch's own flight recorder, which the agent
writes on Gloo) are copied into one folder and given to
`python -m torch.distributed.flight_recorder.fr_trace`; `dlaunch diagnose` reads the run
directory. torch 2.15 writes Gloo's pg_config under an empty group name, which fr_trace cannot
look up (KeyError in build_groups_memberships), so each is run on the dumps as written and on a
copy whose pg_config is rebuilt from the entries' groups and flight.json's process_groups.

--generate N writes an N-rank run directory from the first RUN_DIR (a hang where rank 1 never
entered a collective; every other rank copies rank 0) and times both analyzers on it.
"""
import argparse
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
import time


def dumps_of(run_dir):
    out = {}
    for name in sorted(os.listdir(run_dir)):
        m = re.fullmatch(r"rank(\d+)", name)
        if not m:
            continue
        for f in os.listdir(os.path.join(run_dir, name)):
            if f.startswith("torch_trace_"):
                out[int(m.group(1))] = os.path.join(run_dir, name, f)
    return out


def repaired(dump, flight):
    """dump with pg_config keyed by the groups its entries name, ranks from flight.json."""
    groups = flight.get("process_groups", {}) if flight else {}
    config = {}
    for e in dump.get("entries", []):
        name, desc = e["process_group"]
        ranks = groups.get(name, {}).get("ranks")
        if ranks is None:
            ranks = list(range(flight.get("world_size", 0))) if flight else []
        config[name] = {"name": name, "desc": desc, "ranks": str(ranks)}
    d = dict(dump)
    d["pg_config"] = config or dump.get("pg_config", {})
    return d


def fr_trace(python, folder):
    start = time.monotonic()
    p = subprocess.run([python, "-m", "torch.distributed.flight_recorder.fr_trace", folder, "-p",
                        "torch_trace_", "--allow-incomplete-ranks"],
                       capture_output=True, text=True, cwd="/tmp")
    took = time.monotonic() - start
    text = (p.stdout + p.stderr).strip().splitlines()
    keep = [l for l in text if re.search(r"MISMATCH|Not all ranks|missing|Error|UNDECIDED|"
                                         r"not completed|No errors", l, re.I)]
    return p.returncode, took, keep[-3:] if keep else text[-1:]


def diagnose(dlaunch, run_dir):
    start = time.monotonic()
    p = subprocess.run([dlaunch, "diagnose", run_dir], capture_output=True, text=True)
    took = time.monotonic() - start
    lines = (p.stdout or p.stderr).splitlines()
    return p.returncode, took, lines[0] if lines else ""


def load_flight(run_dir, rank):
    try:
        with open(os.path.join(run_dir, "rank%d" % rank, "flight.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def folders(run_dir, work):
    """(as written, repaired) folders of the run's torch dumps."""
    raw, fixed = os.path.join(work, "raw"), os.path.join(work, "repaired")
    os.makedirs(raw)
    os.makedirs(fixed)
    for rank, path in dumps_of(run_dir).items():
        shutil.copy(path, os.path.join(raw, "torch_trace_%d" % rank))
        with open(path, "rb") as f:
            d = pickle.load(f)
        with open(os.path.join(fixed, "torch_trace_%d" % rank), "wb") as f:
            pickle.dump(repaired(d, load_flight(run_dir, rank)), f)
    return raw, fixed


def compare(args):
    for run_dir in args.run_dirs:
        work = tempfile.mkdtemp(prefix="frcmp-")
        raw, fixed = folders(run_dir, work)
        n = len(os.listdir(raw))
        rc_raw, _, raw_v = fr_trace(args.python, raw)
        rc_fix, _, fix_v = fr_trace(args.python, fixed)
        _, _, verdict = diagnose(args.dlaunch, run_dir)
        print("== %s (%d dumps)" % (os.path.basename(run_dir.rstrip("/")), n))
        print("  fr_trace as written: rc %d: %s" % (rc_raw, " | ".join(raw_v)[:300]))
        print("  fr_trace repaired:   rc %d: %s" % (rc_fix, " | ".join(fix_v)[:300]))
        print("  dlaunch diagnose:    %s" % verdict[:300])
        shutil.rmtree(work)


def generate(template, n, out):
    """An n-rank copy of template: rank 1 as rank 1, every other rank as rank 0."""
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    for f in ("summary.json",):
        if os.path.exists(os.path.join(template, f)):
            shutil.copy(os.path.join(template, f), os.path.join(out, f))
    src = {}
    for r in (0, 1):
        d = os.path.join(template, "rank%d" % r)
        flight = load_flight(template, r)
        with open(dumps_of(template)[r], "rb") as f:
            dump = repaired(pickle.load(f), flight)
        src[r] = (d, flight, dump)
    everyone = list(range(n))
    for r in everyone:
        d, flight, dump = src[1 if r == 1 else 0]
        rd = os.path.join(out, "rank%d" % r)
        os.makedirs(rd)
        fl = dict(flight)
        fl["rank"], fl["world_size"] = r, n
        fl["process_groups"] = {k: dict(v, ranks=everyone) for k, v in fl["process_groups"].items()}
        with open(os.path.join(rd, "flight.json"), "w") as f:
            json.dump(fl, f)
        for name in ("heartbeat.json", "py_stacks.txt", "stderr.log"):
            p = os.path.join(d, name)
            if os.path.exists(p):
                text = open(p).read()
                if name == "heartbeat.json":
                    hb = json.loads(text)
                    hb["rank"] = r
                    text = json.dumps(hb)
                with open(os.path.join(rd, name), "w") as f:
                    f.write(text)
        dp = dict(dump)
        dp["pg_config"] = {k: dict(v, ranks=str(everyone)) for k, v in dp["pg_config"].items()}
        with open(os.path.join(rd, "torch_trace_%d" % r), "wb") as f:
            pickle.dump(dp, f)


def timed(args):
    out = args.out
    generate(args.run_dirs[0], args.generate, out)
    work = tempfile.mkdtemp(prefix="frcmp-")
    _, fixed = folders(out, work)
    dl, fr = [], []
    for _ in range(args.repeat):
        _, t, verdict = diagnose(args.dlaunch, out)
        dl.append(t)
        rc, t2, fr_v = fr_trace(args.python, fixed)
        fr.append(t2)
    med = lambda xs: sorted(xs)[len(xs) // 2]
    print("%d ranks, %d runs each" % (args.generate, args.repeat))
    print("  dlaunch diagnose: median %.3f s (min %.3f, max %.3f): %s" %
          (med(dl), min(dl), max(dl), verdict[:200]))
    print("  fr_trace (repaired dumps): median %.3f s (min %.3f, max %.3f): rc %d %s" %
          (med(fr), min(fr), max(fr), rc, " | ".join(fr_v)[:200]))
    print("  ratio fr_trace / dlaunch: %.1fx" % (med(fr) / med(dl)))
    shutil.rmtree(work)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dlaunch", required=True)
    ap.add_argument("--python", required=True, help="the torch 2.x venv's python")
    ap.add_argument("--generate", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="/tmp/fr-generated")
    ap.add_argument("run_dirs", nargs="+")
    args = ap.parse_args()
    timed(args) if args.generate else compare(args)


if __name__ == "__main__":
    sys.exit(main())
