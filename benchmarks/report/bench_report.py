#!/usr/bin/env python3
"""Times `dlaunch report` on a run directory and the page it writes in headless Chromium.

Prints medians and ranges (min-max) over --repeat runs:
  report_s      wall time of `dlaunch report RUN_DIR -o PAGE`
  page_bytes    size of the page
  load_ms       performance.now() at the page's load event, read back with --dump-dom
  screenshot_s  wall time of `chromium --headless --screenshot` of the whole page (layout and paint
                included), and the same for an empty page, so the difference is the page's cost

usage: bench_report.py --dlaunch build/launcher/dlaunch RUN_DIR [--repeat 5]
Run it under `flock /tmp/dlaunch-bench.lock` on a shared machine.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]


def chromium(args, scratch):
    profile = tempfile.mkdtemp(dir=scratch)
    t = time.monotonic()
    out = subprocess.run(["chromium", *FLAGS, "--user-data-dir=" + profile, *args],
                         capture_output=True, text=True, timeout=120)
    wall = time.monotonic() - t
    shutil.rmtree(profile, ignore_errors=True)
    return wall, out.stdout


def stats(values, unit, scale=1.0):
    v = [x * scale for x in values]
    return "median %.3g %s (range %.3g-%.3g, n=%d)" % (statistics.median(v), unit, min(v), max(v), len(v))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir")
    ap.add_argument("--dlaunch", required=True)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="dlaunch-report-bench-")
    page = os.path.join(scratch, "report.html")
    blank = os.path.join(scratch, "blank.html")
    with open(blank, "w") as f:
        f.write("<!DOCTYPE html><html><body></body></html>\n")
    report = []
    for i in range(args.repeat + 1):
        t = time.monotonic()
        subprocess.run([args.dlaunch, "report", args.run_dir, "-o", page], check=True,
                       stdout=subprocess.DEVNULL)
        if i:  # the first run warms the page cache
            report.append(time.monotonic() - t)
    print("report_s     ", stats(report, "s"))
    print("page_bytes   ", os.path.getsize(page))
    loads, shots, blanks = [], [], []
    for _ in range(args.repeat):
        _, dom = chromium(["--dump-dom", "file://" + page], scratch)
        m = re.search(r'data-rendered-ms="(\d+)"', dom)
        if m:
            loads.append(float(m.group(1)))
        w, _ = chromium(["--screenshot=" + os.path.join(scratch, "p.png"), "--window-size=1000,8000",
                         "file://" + page], scratch)
        shots.append(w)
        w, _ = chromium(["--screenshot=" + os.path.join(scratch, "b.png"), "--window-size=1000,8000",
                         "file://" + blank], scratch)
        blanks.append(w)
    if loads:
        print("load_ms      ", stats(loads, "ms"))
    print("screenshot_s ", stats(shots, "s"))
    print("blank_s      ", stats(blanks, "s"))
    print("page_cost_s  ", "%.3g s (median screenshot minus median blank)" %
          (statistics.median(shots) - statistics.median(blanks)))
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
