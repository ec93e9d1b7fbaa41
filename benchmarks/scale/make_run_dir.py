#!/usr/bin/env python3
"""Writes a synthetic run directory of R ranks, as a hung job leaves it, for `dlaunch diagnose`
at scale (docs/run-directory.md is the format):

    benchmarks/scale/make_run_dir.py OUT --ranks 4096 [--entries 2000] [--culprit 777]
                                     [--python-every 8] [--workers 2]

Every rank has a flight.json of --entries collectives: all completed up to the next-to-last, which
every rank but the culprit started and none completed; the culprit never entered it (its last
collective is the one before). Each rank has events.jsonl (a telemetry line every 100 steps).
Every --python-every'th rank is a Python rank: it also has the agent's heartbeat.json and torch's
flight-recorder pickle (torch_trace_<R>, the dump_dict structure, 2000 entries or --entries if
fewer). summary.json says the launcher stopped the job for a hang (exit 3). Standard library only.
"""
import argparse
import json
import multiprocessing
import os
import pickle

T0_NS = 1796130000000000000
STEP_NS = 50_000_000  # one collective every 50 ms
CALL_SITE = "train.py:88 train_step"


def flight_entry(seq, state):
    start = T0_NS + seq * STEP_NS
    done = start + 20_000_000 if state == "completed" else 0
    return ('{"seq":%d,"collective_seq":%d,"op":"allreduce","dtype":"float","count":262144,'
            '"bytes":1048576,"peer":-1,"root":-1,"state":"%s","scheduled_unix_ns":%d,'
            '"started_unix_ns":%d,"completed_unix_ns":%d,"duration_us":%d,"error":"",'
            '"pg":"0","pg_seq":%d,"call_site":"%s"}'
            % (seq, seq, state, start, start, done, 20000 if done else 0, seq, CALL_SITE))


def torch_entry(seq, state):
    created = T0_NS + seq * STEP_NS
    e = {
        "frames": [{"name": "all_reduce", "filename": "distributed_c10d.py", "line": 2501},
                   {"name": "train_step", "filename": "/work/train.py", "line": 88}],
        "record_id": seq, "pg_id": 0, "process_group": ("0", "default_pg"),
        "collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq + 1,
        "profiling_name": "nccl:all_reduce", "time_created_ns": created,
        "input_sizes": [[262144]], "input_dtypes": ["Float"],
        "output_sizes": [[262144]], "output_dtypes": ["Float"], "state": state,
        "time_discovered_started_ns": created + 1_000_000,
        "time_discovered_completed_ns": created + 20_000_000 if state == "completed" else None,
        "retired": state == "completed", "timeout_ms": 600000, "is_p2p": False,
    }
    if state == "completed":
        e["duration_ms"] = 19.0
    return e


def write_rank(args):
    out, rank, world, entries, culprit, python_every = args
    folder = os.path.join(out, "rank%d" % rank)
    os.makedirs(folder, exist_ok=True)
    last = entries - 1  # the collective of the hang
    n = last if rank == culprit else entries
    body = ",".join(flight_entry(s, "completed" if s < last else "started") for s in range(n))
    dumped_ms = (T0_NS + entries * STEP_NS) // 1_000_000 + 5000
    with open(os.path.join(folder, "flight.json"), "w") as f:
        f.write('{"schema":"dlaunch.flight/1","rank":%d,"world_size":%d,"backend":"gloo",'
                '"reason":"request","dumped_unix_ms":%d,"capacity":%d,"entries":[%s]}'
                % (rank, world, dumped_ms, entries, body))
    with open(os.path.join(folder, "events.jsonl"), "w") as f:
        for step in range(0, n, 100):
            f.write(json.dumps({"schema": "dlaunch.events/1",
                                "unix_ms": (T0_NS + step * STEP_NS) // 1_000_000, "rank": rank,
                                "kind": "telemetry", "step": step, "phase": "forward",
                                "step_ms": 50.0, "rss_bytes": 2 << 30}) + "\n")
    if python_every > 0 and rank % python_every == 0:
        progress_ms = (T0_NS + (n - 1) * STEP_NS) // 1_000_000
        with open(os.path.join(folder, "heartbeat.json"), "w") as f:
            json.dump({"schema": "dlaunch.heartbeat/1", "rank": rank, "pid": 1000 + rank,
                       "unix_ms": dumped_ms, "progress_unix_ms": progress_ms,
                       "step": n, "phase": "communication" if rank != culprit else "data",
                       "last_started_seq": n - 1,
                       "last_completed_seq": last - 1, "current_op": "allreduce"}, f)
        kept = range(max(0, n - 2000), n)
        doc = {"version": "2.4", "comm_lib_version": "2.21.5",
               "pg_config": {"0": {"name": "0", "desc": "default_pg",
                                   "ranks": str(list(range(world)))}},
               "pg_status": {"0": {"last_enqueued_collective": n - 1,
                                   "last_started_collective": n - 1,
                                   "last_completed_collective": last - 1}},
               "entries": [torch_entry(s, "completed" if s < last else "started") for s in kept],
               "nccl_comm_state": {}}
        with open(os.path.join(folder, "torch_trace_%d" % rank), "wb") as f:
            pickle.dump(doc, f, protocol=2)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--ranks", type=int, required=True)
    p.add_argument("--entries", type=int, default=2000)
    p.add_argument("--culprit", type=int, default=777)
    p.add_argument("--python-every", type=int, default=8)
    p.add_argument("--workers", type=int, default=2)
    a = p.parse_args()
    culprit = a.culprit % a.ranks
    os.makedirs(a.out, exist_ok=True)
    jobs = [(a.out, r, a.ranks, a.entries, culprit, a.python_every) for r in range(a.ranks)]
    with multiprocessing.Pool(a.workers) as pool:
        for _ in pool.imap_unordered(write_rank, jobs, chunksize=16):
            pass
    ranks = [{"rank": r, "host": "node%d" % (r // 16), "pid": 1000 + r, "status": "killed",
              "node_rank": r // 16, "start_unix_ms": T0_NS // 1_000_000,
              "end_unix_ms": (T0_NS + a.entries * STEP_NS) // 1_000_000 + 6000,
              "exit_code": -15, "signal": "SIGTERM"} for r in range(a.ranks)]
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump({"schema": "dlaunch.summary/1", "run_id": "scale", "host": "node0",
                   "exit_code": 3, "restarts": 0, "error": "hang detected",
                   "updated_unix_ms": ranks[0]["end_unix_ms"], "ranks": ranks,
                   "attempts": [{"attempt": 0, "restart_count": 0, "nnodes": (a.ranks + 15) // 16,
                                 "world_size": a.ranks, "exit_code": 3}]}, f)
    print("%s: %d ranks, %d entries each, culprit rank %d never entered #%d"
          % (a.out, a.ranks, a.entries, culprit, a.entries - 1))


if __name__ == "__main__":
    main()
