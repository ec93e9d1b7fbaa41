#!/usr/bin/env python3
"""dlaunch beside today's launchers, on the CPU, in one run: torchrun 2.15, nvidia-resiliency-ext
0.7's ft_launcher and DeepSpeed 0.19's `deepspeed`, all from .venv-peers (scripts/peers-venv.sh).
Every part runs the tools interleaved run by run (the order rotated every round), REPEAT rounds,
at each rank count, and prints medians with min-max spreads and each peer's ratio to dlaunch.

  flock /tmp/dlaunch-bench.lock benchmarks/peers/run.py --dlaunch build/launcher/dlaunch \
      --venv .venv-peers --ranks 2 4 --repeat 5 --hang-timeout 5

Parts (--parts, default all):
  launch    launch-to-exit: N ranks of /bin/true (torchrun and ft_launcher --standalone
            --no-python; deepspeed --num_gpus N --no_python --no_local_rank on a free port).
  teardown  failure-to-teardown: rank 1 exits 1 at once, the others sleep; from rank 1's exit
            (a timestamp it writes) to the launcher's exit. No restarts (--max-restarts 0).
  hang      hang to kill to restart: benchmarks/peers/hang_rank.py, rank 1 stops (no heartbeat, no
            collective) at step 10; one restart allowed. dlaunch --hang-timeout H --on-hang
            restart; ft_launcher with its heartbeats (--ft-rank-heartbeat-timeout H, its default
            5 s check interval, and again with --ft-workload-check-interval 1) and with its
            sections (--ft-rank-section-timeouts step:H --ft-rank-out-of-section-timeout H).
            Times from the fault to the hung rank's death (a pidfd on it), to the last restarted
            rank started (its first line) and to the restarted job's first all-reduce.
  restart   failure-to-restart on one node: benchmarks/elastic/step.py, the last rank exits 3
            after the first all-reduce; --max-restarts 1 (dlaunch, torchrun --standalone,
            ft_launcher; DeepSpeed's launcher has no restarts). From the failure to the last
            restarted rank started and to the restarted job's first all-reduce.
  output    not timed: what each launcher prints for 2 ranks that each write a line to stdout
            and to stderr, by default and with its per-rank log option, and the files it writes.
torchrun 2.15's failure-to-restart across nodes is benchmarks/elastic/restart_bench.sh (PY=).
"""
import argparse
import os
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FAIL_RANK = """#!/bin/sh
if [ "$RANK" = 1 ]; then date +%s%N > "$MARK"; exit 1; fi
exec sleep 600
"""
HELLO_RANK = """#!/bin/sh
echo "out line of rank $RANK"
echo "err line of rank $RANK" >&2
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def median_spread(values, scale=1.0, fmt="%.3f"):
    if not values:
        return "no result"
    v = [x * scale for x in values]
    return (fmt + " (" + fmt + "-" + fmt + ")") % (statistics.median(v), min(v), max(v))


def ratio(values, base):
    if not values or not base:
        return ""
    return "%.1fx" % (statistics.median(values) / statistics.median(base))


class Tools:
    """The command line of each launcher for N ranks of PROGRAM (a list)."""

    def __init__(self, args, work):
        self.dlaunch = os.path.realpath(args.dlaunch)
        self.bin = os.path.join(os.path.realpath(args.venv), "bin")
        self.python = os.path.join(self.bin, "python")
        self.work = work

    def argv(self, tool, n, program, restarts=0):
        logs = os.path.join(self.work, tool)
        if tool == "dlaunch":
            return [self.dlaunch, "--nproc", str(n), "--max-restarts", str(restarts),
                    "--log-dir", logs, "--"] + program
        if tool == "torchrun":
            return [os.path.join(self.bin, "torchrun"), "--standalone", "--nproc-per-node",
                    str(n), "--max-restarts", str(restarts), "--no-python"] + program
        if tool == "ft_launcher":
            return [os.path.join(self.bin, "ft_launcher"), "--standalone", "--nproc-per-node",
                    str(n), "--max-restarts", str(restarts), "--ft-ignore-missing-cfg",
                    "--no-python"] + program
        if tool == "deepspeed":
            return [os.path.join(self.bin, "deepspeed"), "--num_gpus", str(n), "--master_port",
                    str(free_port()), "--no_python", "--no_local_rank"] + program
        raise ValueError(tool)


PEERS = ("dlaunch", "torchrun", "ft_launcher", "deepspeed")


def rounds(args, tools):
    """(round, n, tool) in the interleaved order: each round rotates the tools by one."""
    for i in range(args.repeat):
        for n in args.ranks:
            k = i % len(tools)
            for tool in tools[k:] + tools[:k]:
                yield i, n, tool


def quiet_run(argv, env=None, timeout=300):
    with open(os.devnull, "wb") as null:
        return subprocess.run(argv, stdout=null, stderr=null, env=env, timeout=timeout).returncode


def part_launch(args, tools, work):
    times = {}
    for i, n, tool in rounds(args, list(PEERS)):
        t0 = time.monotonic()
        rc = quiet_run(tools.argv(tool, n, ["/bin/true"]))
        dt = time.monotonic() - t0
        if rc == 0:
            times.setdefault((tool, n), []).append(dt)
        print("launch round %d: %s %d ranks %.3f s (exit %d)" % (i, tool, n, dt, rc), flush=True)
    return times


def part_teardown(args, tools, work):
    rank = os.path.join(work, "fail_rank.sh")
    with open(rank, "w") as f:
        f.write(FAIL_RANK)
    os.chmod(rank, 0o755)
    mark = os.path.join(work, "mark")
    times = {}
    for i, n, tool in rounds(args, list(PEERS)):
        if os.path.exists(mark):
            os.unlink(mark)
        rc = quiet_run(tools.argv(tool, n, [rank]), env=dict(os.environ, MARK=mark))
        end = time.time_ns()
        try:
            dt = (end - int(open(mark).read())) / 1e9
        except (OSError, ValueError):
            print("teardown round %d: %s %d ranks: no mark (exit %d)" % (i, tool, n, rc))
            continue
        times.setdefault((tool, n), []).append(dt)
        print("teardown round %d: %s %d ranks %.3f s (exit %d)" % (i, tool, n, dt, rc), flush=True)
    return times


def restart_variants(args, tools, hang):
    """The launchers of the hang part (hang=True) or of the restart part: name -> argv prefix
    that the rank count and the script follow."""
    ft = [os.path.join(tools.bin, "ft_launcher"), "--standalone", "--max-restarts", "1",
          "--ft-ignore-missing-cfg"]
    dl = [tools.dlaunch, "--max-restarts", "1", "--python", tools.python, "-q"]
    if not hang:
        return {"dlaunch": dl, "torchrun": [os.path.join(tools.bin, "torchrun"), "--standalone",
                                            "--max-restarts", "1"], "ft_launcher": ft}
    h = str(args.hang_timeout)
    heartbeats = ["--ft-initial-rank-heartbeat-timeout", "60", "--ft-rank-heartbeat-timeout", h]
    return {
        "dlaunch": dl + ["--hang-timeout", h, "--on-hang", "restart"],
        "ft_launcher heartbeats": ft + heartbeats,
        "ft_launcher heartbeats, check 1 s": ft + heartbeats + ["--ft-workload-check-interval", "1"],
        "ft_launcher sections": ft + ["--ft-rank-section-timeouts", "step:" + h,
                                      "--ft-rank-out-of-section-timeout", h],
    }


def watch_fault(proc, fault, timeout):
    """Blocks until the launcher exits (at most `timeout` s). Where the fault file names the
    faulty rank's pid, returns the time that rank died, seen through a pidfd; else None."""
    died, deadline = None, time.time() + timeout
    while proc.poll() is None and time.time() < deadline:
        if died is None and os.path.exists(fault):
            words = open(fault).read().split()
            if len(words) < 2:  # no pid (step.py's fail file), or the rank is still writing it
                time.sleep(0.02)
                continue
            try:
                fd = os.pidfd_open(int(words[1]))
            except ProcessLookupError:
                died = time.time()
                continue
            select.select([fd], [], [], max(0.0, deadline - time.time()))
            died = time.time()
            os.close(fd)
        else:
            time.sleep(0.02)
    if proc.poll() is None:  # the launcher and whatever it left: its session, started for it
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return died


def part_restart(args, tools, work, hang):
    """hang: hang_rank.py's silent rank 1; else elastic/step.py's last rank exiting 3 after the
    first step. Returns {(tool, n, "killed"|"started"|"step"): [seconds after the fault]}."""
    variants = restart_variants(args, tools, hang)
    script, fault_name = ((os.path.join(HERE, "hang_rank.py"), "fault") if hang else
                          (os.path.join(HERE, "..", "elastic", "step.py"), "fail"))
    part = "hang" if hang else "restart"
    times = {}
    for i, n, tool in rounds(args, list(variants)):
        out = tempfile.mkdtemp(prefix="dlaunch-peers-%s-" % part)  # kept when a run fails
        if tool == "dlaunch":
            argv = variants[tool] + ["--nproc", str(n), "--log-dir", os.path.join(out, "logs"),
                                     "--env", "BENCH_OUT=" + out, script]
        else:
            argv = variants[tool] + ["--nproc-per-node", str(n), script]
        with open(os.path.join(out, "console"), "wb") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True,
                                    env=dict(os.environ, BENCH_OUT=out))
            died = watch_fault(proc, os.path.join(out, fault_name), 240)
        try:
            fault = float(open(os.path.join(out, fault_name)).read().split()[0])
            read = lambda prefix: [float(open(os.path.join(out, "%s%d" % (prefix, r))).read())
                                   for r in range(n)]
            row = {"started": max(read("start")) - fault, "step": max(read("step")) - fault}
        except (OSError, ValueError):
            print("%s round %d: %s %d ranks: no result (exit %d, see %s)" %
                  (part, i, tool, n, proc.returncode, out))
            continue
        if died is not None:
            row["killed"] = died - fault
        for k, v in row.items():
            times.setdefault((tool, n, k), []).append(v)
        print("%s round %d: %s %d ranks: %s (exit %d)" % (
            part, i, tool, n, ", ".join("%s %.3f s" % kv for kv in sorted(row.items())),
            proc.returncode), flush=True)
        if proc.returncode == 0:  # else its console stays for a look
            shutil.rmtree(out, ignore_errors=True)
    return times, list(variants)


def restart_table(args, times, variants, hang):
    cols = (["killed"] if hang else []) + ["started", "step"]
    names = {"killed": "fault -> hung rank killed, s",
             "started": "fault -> restarted ranks started, s",
             "step": "fault -> restarted job's first step, s"}
    t = ["| launcher | ranks | " + " | ".join(names[c] + " | / dlaunch" for c in cols) + " |",
         "| --- | --- |" + " --- | --- |" * len(cols)]
    for n in args.ranks:
        for tool in variants:
            cells = []
            for c in cols:
                v = times.get((tool, n, c), [])
                cells += [median_spread(v) + (" [%d runs]" % len(v) if len(v) != args.repeat else ""),
                          ratio(v, times.get(("dlaunch", n, c))) if tool != "dlaunch" else ""]
            t.append("| %s | %d | %s |" % (tool, n, " | ".join(cells)))
    return "\n".join(t)


def part_output(args, tools, work):
    rank = os.path.join(work, "hello_rank.sh")
    with open(rank, "w") as f:
        f.write(HELLO_RANK)
    os.chmod(rank, 0o755)
    cases = []
    for tool in PEERS:
        cases.append((tool + " (default)", tools.argv(tool, 2, [rank])))
    logs = os.path.join(work, "out-logs")
    argv = tools.argv("torchrun", 2, [rank])
    cases.append(("torchrun --tee 3 --log-dir", argv[:1] + ["--tee", "3", "--log-dir", logs] + argv[1:]))
    argv = tools.argv("deepspeed", 2, [rank])
    cases.append(("deepspeed --enable_each_rank_log", argv[:1] + ["--enable_each_rank_log", logs] + argv[1:]))
    argv = tools.argv("ft_launcher", 2, [rank])
    cases.append(("ft_launcher --ft-per-cycle-applog-prefix",
                  argv[:1] + ["--ft-per-cycle-applog-prefix", os.path.join(logs, "job.log")] + argv[1:]))
    for name, argv in cases:
        shutil.rmtree(logs, ignore_errors=True)
        shutil.rmtree(os.path.join(work, "dlaunch"), ignore_errors=True)
        os.makedirs(logs)
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           cwd=work, timeout=120)
        print("\n### %s (exit %d)\n$ %s" % (name, p.returncode, " ".join(argv).replace(work, "W")))
        for stream, text in (("stdout", p.stdout), ("stderr", p.stderr)):
            lines = [l for l in text.splitlines() if "line of rank" in l]
            print("%s, the ranks' lines: %s" % (stream, lines))
        files = []
        for root in (logs, os.path.join(work, "dlaunch")):
            for d, _, names in os.walk(root):
                files += [os.path.relpath(os.path.join(d, x), work) for x in names]
        print("files: %s" % sorted(files)[:24])
        for name in sorted(files)[:4]:  # how a rank's lines stand in the launcher's own files
            lines = [l.rstrip("\n") for l in open(os.path.join(work, name), errors="replace")
                     if "line of rank" in l]
            if lines:
                print("  %s: %s" % (name, lines[:4]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dlaunch", required=True)
    ap.add_argument("--venv", default=".venv-peers")
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--hang-timeout", type=float, default=5)
    ap.add_argument("--parts", default="launch,teardown,restart,hang,output")
    args = ap.parse_args()
    parts = args.parts.split(",")
    work = tempfile.mkdtemp(prefix="dlaunch-peers-")
    tools = Tools(args, work)
    print("start %s UTC; uptime: %s" % (time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
                                        subprocess.run(["uptime"], stdout=subprocess.PIPE,
                                                       text=True).stdout.strip()), flush=True)
    tables = []
    if "launch" in parts or "teardown" in parts:
        launch = part_launch(args, tools, work) if "launch" in parts else {}
        teardown = part_teardown(args, tools, work) if "teardown" in parts else {}
        t = ["| launcher | ranks | launch-to-exit ms: median (min-max) | / dlaunch | "
             "failure-to-teardown ms: median (min-max) | / dlaunch |", "| --- | --- | --- | --- | --- | --- |"]
        for n in args.ranks:
            for tool in PEERS:
                l, d = launch.get((tool, n), []), teardown.get((tool, n), [])
                t.append("| %s | %d | %s | %s | %s | %s |" % (
                    tool, n, median_spread(l, 1e3, "%.0f"),
                    ratio(l, launch.get(("dlaunch", n))) if tool != "dlaunch" else "",
                    median_spread(d, 1e3, "%.0f"),
                    ratio(d, teardown.get(("dlaunch", n))) if tool != "dlaunch" else ""))
        tables.append("\n".join(t))
    for part in ("restart", "hang"):
        if part in parts:
            times, variants = part_restart(args, tools, work, part == "hang")
            tables.append(restart_table(args, times, variants, part == "hang"))
    print("\nend %s UTC; uptime: %s" % (time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
                                        subprocess.run(["uptime"], stdout=subprocess.PIPE,
                                                       text=True).stdout.strip()))
    for t in tables:
        print("\n" + t)
    if "output" in parts:
        part_output(args, tools, work)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
