"""Medians of the rounds written by run_comm_bench.sh, as a markdown table."""

import glob
import json
import os
import statistics
import sys


def load(pattern, pick):
    runs = []
    for path in sorted(glob.glob(pattern)):
        with open(path) as f:
            runs.append({r["size"]: r for r in pick(json.load(f))})
    return runs


def median_of(runs, size, key):
    values = [r[size][key] for r in runs if size in r]
    return statistics.median(values) if values else float("nan")


def human(size):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def in_place(rows):
    """dlaunch's in-place column: the same operation as torch's in-place all_reduce (and what
    preflight measured before it had an out-of-place column); the out-of-place busbw is kept."""
    out = []
    for r in rows:
        if "in_place" in r:
            out.append(dict(r["in_place"], size=r["size"], oop_busbw_gbps=r["busbw_gbps"]))
        else:
            out.append(dict(r, oop_busbw_gbps=float("nan")))
    return out


def main(out):
    dl = load(os.path.join(out, "dlaunch-*.json"), lambda d: in_place(d["bandwidth"][0]["rows"]))
    tr = load(os.path.join(out, "torch-*.json"), lambda d: d["rows"])
    with open(os.path.join(out, "memcpy.json")) as f:
        memcpy = json.load(f)
    sizes = sorted(set(dl[0]) & set(tr[0]))
    print(f"memcpy bandwidth (64 MiB, median of {memcpy['repeats']}): "
          f"{memcpy['median_gbps']:.2f} GB/s\n")
    print(f"medians of {len(dl)} dlaunch and {len(tr)} torch rounds\n")
    print("| size | dlaunch time (us) | torch time (us) | dlaunch busbw (GB/s) "
          "| torch busbw (GB/s) | busbw ratio | dlaunch out-of-place busbw (GB/s) |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    ratios = []
    for s in sizes:
        dt, tt = median_of(dl, s, "time_us"), median_of(tr, s, "time_us")
        db, tb = median_of(dl, s, "busbw_gbps"), median_of(tr, s, "busbw_gbps")
        ratio = db / tb if tb else float("nan")
        if s >= 1 << 20:
            ratios.append(ratio)
        oop = median_of(dl, s, "oop_busbw_gbps")
        print(f"| {human(s)} | {dt:.1f} | {tt:.1f} | {db:.3f} | {tb:.3f} | {ratio:.2f}x "
              f"| {oop:.3f} |")
    print()
    if ratios:
        print(f"busbw ratio dlaunch/torch at >= 1 MiB: min {min(ratios):.2f}x, "
              f"median {statistics.median(ratios):.2f}x")
    if 1024 in sizes:
        d, t = median_of(dl, 1024, "time_us"), median_of(tr, 1024, "time_us")
        print(f"latency at 1 KiB: dlaunch {d:.1f} us, torch {t:.1f} us ({t / d:.2f}x lower)")


if __name__ == "__main__":
    main(sys.argv[1])
