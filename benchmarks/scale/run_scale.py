#!/usr/bin/env python3
"""The scale harness: N dlaunch launchers on this host as the nodes of one job, M ranks each
(scale_rank, a small native rank linked with libdlaunch: heartbeats, a flight recorder, a store
barrier per step), then a hang injected at one rank. Prints one JSON object of figures:

    benchmarks/scale/run_scale.py --build build --nodes 64 --per-node 16 [--hang-rank 777]
        [--hang-timeout 5] [--window 10] [--step-ms 1000]

rendezvous_s      launchers started -> every rank's registration returned (on one host this is
                  mostly starting every launcher and rank process on its cores)
release_spread_s  first -> last rank's registration returned (the coordinator's fan-out)
coord_cpu_share   node 0's launcher (coordinator + its own ranks' supervisor) CPU time / wall
                  time over the steady window, in cores
coord_rss_bytes   its resident memory at the end of the window
coord_threads     its thread count then
net_intake_bytes_per_s   bytes per second node 0's coordinator port received over the window
                  (every established connection's bytes_received, ss -ti)
disk_written_bytes_per_s node 0's launcher's file writes per second (/proc/PID/io wchar)
hang_to_diagnosis_s  the injected hang's timestamp -> diagnosis.json written
diagnosis_write_s    diagnosis.json's created_unix_ms (stall judged) -> the file written
culprit_ok        diagnosis.json names exactly the hung rank
Standard library only; everything runs under one temporary folder, removed at the end.
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def proc_threads(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


def proc_io(pid):
    io = {}
    with open("/proc/%d/io" % pid) as f:
        for line in f:
            k, v = line.split(":")
            io[k] = int(v)
    return io


def received_on_port(port):
    """Bytes received so far by every established connection to local `port` (ss -ti)."""
    text = subprocess.run(["ss", "-tinH", "state", "established", "( sport = :%d )" % port],
                          capture_output=True, text=True).stdout
    return sum(int(tok.split(":")[1]) for tok in text.split() if tok.startswith("bytes_received:"))


def first_line_value(path, word):
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(word):
                    return int(line.split()[len(word.split())])
    except OSError:
        pass
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default="build")
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--per-node", type=int, required=True)
    p.add_argument("--hang-rank", type=int, default=777)
    p.add_argument("--hang-timeout", type=float, default=5)
    p.add_argument("--window", type=float, default=10)
    p.add_argument("--step-ms", type=int, default=1000)
    p.add_argument("--keep", action="store_true", help="keep the temporary folder")
    a = p.parse_args()
    build = os.path.abspath(a.build)
    dlaunch = os.path.join(build, "launcher", "dlaunch")
    rank_bin = os.path.join(build, "benchmarks", "scale", "scale_rank")
    world = a.nodes * a.per_node
    hang_rank = a.hang_rank % world
    # The hang comes after the steady window: rendezvous, then `window` seconds of steps.
    hang_step = int((a.window + 5) * 1000 / a.step_ms) + 2
    tmp = tempfile.mkdtemp(prefix="dlaunch-scale-")
    env = dict(os.environ, DLAUNCH_JOB_TOKEN="scale-harness-token-0123456789abcdef",
               SCALE_HANG_RANK=str(hang_rank), SCALE_HANG_STEP=str(hang_step),
               SCALE_STEP_MS=str(a.step_ms))
    port = free_port()
    endpoint = "127.0.0.1:%d" % port
    procs = []
    out = {"nodes": a.nodes, "per_node": a.per_node, "ranks": world, "hang_rank": hang_rank}
    try:
        start = time.time()
        for n in range(a.nodes):
            argv = [dlaunch, "--nnodes", str(a.nodes), "--node-rank", str(n), "--rdzv-endpoint",
                    endpoint, "--nproc", str(a.per_node), "--log-dir", os.path.join(tmp, "n%d" % n),
                    "--run-id", "scale", "--hang-timeout", str(a.hang_timeout),
                    "--rdzv-timeout", "300", "--quiet", rank_bin]
            procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL,
                                          stderr=open(os.path.join(tmp, "n%d.err" % n), "w")))
        run = lambda n: os.path.join(tmp, "n%d" % n, "scale")
        # Rendezvous: every rank printed the time its registration returned.
        registered = {}
        deadline = time.time() + 300
        while len(registered) < world and time.time() < deadline:
            for r in range(world):
                if r not in registered:
                    t = first_line_value(os.path.join(run(r // a.per_node), "rank%d" % r,
                                                      "stdout.log"), "registered")
                    if t is not None:
                        registered[r] = t
            if any(pr.poll() is not None for pr in procs):
                break
            time.sleep(0.2)
        if len(registered) < world:
            out["error"] = "only %d of %d ranks registered" % (len(registered), world)
            print(json.dumps(out))
            return 1
        out["rendezvous_s"] = round(max(registered.values()) / 1000 - start, 3)
        # How far apart the coordinator released the ranks once the last one registered.
        out["release_spread_s"] = round((max(registered.values()) - min(registered.values()))
                                        / 1000, 3)
        # The steady window: node 0's launcher at the default heartbeat interval.
        zero = procs[0].pid
        cpu0, io0, net0, t0 = proc_cpu_s(zero), proc_io(zero), received_on_port(port), time.time()
        time.sleep(a.window)
        cpu1, io1, net1, t1 = proc_cpu_s(zero), proc_io(zero), received_on_port(port), time.time()
        out["coord_cpu_share"] = round((cpu1 - cpu0) / (t1 - t0), 4)
        out["coord_rss_bytes"] = proc_rss(zero)
        out["coord_rss_per_rank_bytes"] = out["coord_rss_bytes"] // world
        out["coord_threads"] = proc_threads(zero)
        out["net_intake_bytes_per_s"] = int((net1 - net0) / (t1 - t0))
        out["disk_written_bytes_per_s"] = int((io1["wchar"] - io0["wchar"]) / (t1 - t0))
        # The hang, and node 0's diagnosis of it.
        procs[0].wait(timeout=a.hang_timeout + hang_step * a.step_ms / 1000 + 120)
        out["exit_code"] = procs[0].returncode
        diag_path = os.path.join(run(0), "diagnosis.json")
        with open(diag_path) as f:
            diag = json.load(f)
        injected = first_line_value(os.path.join(run(hang_rank // a.per_node),
                                                 "rank%d" % hang_rank, "stderr.log"),
                                    "injected hang")
        written = os.stat(diag_path).st_mtime
        out["hang_to_diagnosis_s"] = round(written - injected / 1000, 3) if injected else None
        out["diagnosis_write_s"] = round(written - diag.get("created_unix_ms", 0) / 1000, 3)
        out["culprit_ok"] = diag.get("culprit_ranks") == [hang_rank]
        out["headline"] = diag.get("headline", "")[:200]
        with open(os.path.join(run(0), "diagnosis.txt")) as f:
            out["console_lines"] = sum(1 for _ in f)
        print(json.dumps(out))
        return 0
    finally:
        for pr in procs:
            if pr.poll() is None:
                pr.kill()
        for pr in procs:
            pr.wait()
        if a.keep:
            print("kept " + tmp, file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
