#!/usr/bin/env python3
"""Two dlaunch binaries side by side, interleaved run by run (the order swapped every round):
launch-to-exit, failure-to-restart and hang-to-exit, for a change that must not make them worse.

  flock /tmp/dlaunch-bench.lock benchmarks/launch/before_after.py BEFORE AFTER --rounds 10

  launch   N ranks of /bin/true: the launcher's wall time.
  restart  2 ranks, --max-restarts 1: rank 1 of attempt 0 writes the time and exits 1; from then
           to the last rank of attempt 1 started (each writes the time as it starts).
  hang     2 ranks that go silent after writing the time, --hang-on-silence --hang-timeout 1
           --grace-period 1: from the silence to the launcher's exit (code 3); the floor is the
           1 s hang timeout.
Prints, per measure, each binary's median (min-max) in ms and after/before.
"""
import argparse
import glob
import os
import statistics
import subprocess
import sys
import tempfile
import time

RESTART_RANK = """#!/bin/sh
now() { date +%s.%N; }
if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then
  if [ "$RANK" = 1 ]; then now > "$MARK/fail"; exit 1; fi
  exec sleep 600
fi
now > "$MARK/start.$RANK"
"""
# (No python3 in the ranks: a Python child loads the rank agent and the rank is then no silent
# program.)
HANG_RANK = """#!/bin/sh
date +%s.%N > "$MARK/silent.$RANK"
exec sleep 600
"""


def write_script(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)


def run(binary, args, env):
    start = time.time()
    try:
        code = subprocess.run([binary] + args, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=60).returncode
    except subprocess.TimeoutExpired:
        code = None
    return code, start, time.time()


def read_times(pattern):
    return [float(open(p).read()) for p in glob.glob(pattern)]


def launch(binary, work, ranks):
    code, start, end = run(binary, ["--nproc", str(ranks), "--log-dir", work + "/logs", "--",
                                    "/bin/true"], os.environ)
    return (end - start) * 1e3 if code == 0 else None


def restart(binary, work, script):
    mark = tempfile.mkdtemp(dir=work)
    env = dict(os.environ, MARK=mark)
    code, _, _ = run(binary, ["--nproc", "2", "--max-restarts", "1", "--log-dir", work + "/logs",
                              "--", script], env)
    starts = read_times(mark + "/start.*")
    if code != 0 or len(starts) != 2:
        return None
    return (max(starts) - read_times(mark + "/fail")[0]) * 1e3


def hang(binary, work, script):
    mark = tempfile.mkdtemp(dir=work)
    env = dict(os.environ, MARK=mark)
    code, _, end = run(binary, ["--nproc", "2", "--hang-on-silence", "--hang-timeout", "1",
                                "--grace-period", "1", "--log-dir", work + "/logs", "--", script],
                       env)
    silent = read_times(mark + "/silent.*")
    if code != 3 or len(silent) != 2:
        return None
    return (end - max(silent)) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--ranks", type=int, default=4)
    a = ap.parse_args()
    binaries = {"before": os.path.realpath(a.before), "after": os.path.realpath(a.after)}
    work = tempfile.mkdtemp(prefix="dlaunch-before-after-")
    restart_script, hang_script = work + "/restart.sh", work + "/hang.sh"
    write_script(restart_script, RESTART_RANK)
    write_script(hang_script, HANG_RANK)
    measures = {
        "launch-to-exit (%d ranks)" % a.ranks: lambda b: launch(b, work, a.ranks),
        "failure-to-restart (2 ranks)": lambda b: restart(b, work, restart_script),
        "hang-to-exit (2 ranks)": lambda b: hang(b, work, hang_script),
    }
    times = {(m, w): [] for m in measures for w in binaries}
    failed = {(m, w): 0 for m in measures for w in binaries}
    for r in range(a.rounds):
        order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
        for m, fn in measures.items():
            for w in order:
                t = fn(binaries[w])
                if t is None:
                    failed[(m, w)] += 1
                else:
                    times[(m, w)].append(t)
    print("| measure | before ms: median (min-max) | after ms: median (min-max) | after/before |")
    print("| --- | --- | --- | --- |")
    for m in measures:
        cells = []
        for w in ("before", "after"):
            t = times[(m, w)]
            cell = "%.0f (%.0f-%.0f)" % (statistics.median(t), min(t), max(t)) if t else "none"
            if failed[(m, w)]:
                cell += ", %d failed" % failed[(m, w)]
            cells.append(cell)
        b, f = times[(m, "before")], times[(m, "after")]
        ratio = "%.2f" % (statistics.median(f) / statistics.median(b)) if b and f else "-"
        print("| %s | %s | %s | %s |" % (m, cells[0], cells[1], ratio))


if __name__ == "__main__":
    sys.exit(main())
