#!/usr/bin/env python3
"""What one /metrics scrape costs the launcher, measured where it is paid: the launcher's own CPU
time (utime + stime from /proc, its ranks not included) while a built-in `train` job runs.

Rounds alternate a quiet window of SECONDS (no scrape: the launcher's CPU rate without one) and a
burst of as many back-to-back scrapes as SECONDS allow, over one kept-alive connection as
Prometheus keeps it; the extra CPU per scrape is the burst's CPU minus the quiet rate times the
burst's length, over its scrapes. The
ranks' ms/step in each window comes from train's progress lines, so the burst's effect on the
step (at hundreds of scrapes a second, not one every few seconds) is shown too.

usage: scrape_cost.py BUILD_DIR [NPROC] [ROUNDS] [SECONDS]
"""
import http.client
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

build = sys.argv[1]
nproc = int(sys.argv[2]) if len(sys.argv) > 2 else 4
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 3.0
tick_ms = 1000.0 / os.sysconf("SC_CLK_TCK")


def cpu_ms(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * tick_ms  # utime, stime


logs = tempfile.mkdtemp(prefix="dlaunch-scrape-")
job = subprocess.Popen(
    [os.path.join(build, "launcher", "dlaunch"), "--nproc", str(nproc), "--log-dir", logs,
     "--run-id", "scrape", "--metrics-port", "0", "train", "--data", "synthetic", "--model", "mlp",
     "--no-preflight", "--steps", "100000000"],
    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
port = None
steps = []  # (monotonic time, ms/step) of each progress line
ready = threading.Event()


def read_output():
    global port
    for line in job.stdout:
        m = re.search(r"metrics on http://127\.0\.0\.1:(\d+)", line)
        if m:
            port = int(m.group(1))
        m = re.search(r"\(([0-9.]+) ms/step\)", line)
        if m:
            steps.append((time.monotonic(), float(m.group(1))))
            if port:
                ready.set()


def step_ms(t0, t1):
    inside = [ms for t, ms in steps if t0 <= t <= t1]
    return statistics.median(inside) if inside else float("nan")


threading.Thread(target=read_output, daemon=True).start()
# The job goes with this script, whatever ends it (an error, ^C).
try:
    if not ready.wait(120):
        sys.exit("scrape_cost: the job never trained with its metrics server up")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    size = 0
    extra, quiet_steps, burst_steps, rates = [], [], [], []
    for r in range(rounds):
        t0, c0 = time.monotonic(), cpu_ms(job.pid)
        time.sleep(seconds)  # the quiet window: nothing to wait for but time
        t1, c1 = time.monotonic(), cpu_ms(job.pid)
        scrapes = 0
        while time.monotonic() < t1 + seconds:
            scrapes += 1
            try:
                conn.request("GET", "/metrics")
                resp = conn.getresponse()
                size = len(resp.read())
            except (http.client.RemoteDisconnected, ConnectionError):
                conn.close()  # the server ends a connection after 100 requests, as it may
                continue
            if resp.status != 200:
                sys.exit("scrape_cost: /metrics answered %d" % resp.status)
        t2, c2 = time.monotonic(), cpu_ms(job.pid)
        quiet_rate = (c1 - c0) / (t1 - t0)
        extra.append(((c2 - c1) - quiet_rate * (t2 - t1)) / scrapes)
        rates.append(scrapes / (t2 - t1))
        quiet_steps.append(step_ms(t0, t1))
        burst_steps.append(step_ms(t1, t2))
        print("round %d: quiet %.1f ms CPU/s, %.2f ms/step; burst of %d scrapes in %.2f s (%.0f/s): "
              "%.3f ms CPU per scrape, %.2f ms/step" % (r + 1, quiet_rate, quiet_steps[-1],
                                                       scrapes, t2 - t1, rates[-1], extra[-1],
                                                       burst_steps[-1]), flush=True)
    print("ranks %d, /metrics %d bytes" % (nproc, size))
    print("launcher CPU per scrape (ms): median %.3f, range %.3f-%.3f" %
          (statistics.median(extra), min(extra), max(extra)))
    print("scrapes per second in the bursts: median %.0f" % statistics.median(rates))
finally:
    job.terminate()
    job.wait(60)

ratios = [b / q for b, q in zip(burst_steps, quiet_steps) if q == q and b == b]
if ratios:
    print("ms/step, burst / quiet window: median %.3f, range %.3f-%.3f" %
          (statistics.median(ratios), min(ratios), max(ratios)))
