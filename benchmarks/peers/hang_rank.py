"""A rank that hangs by going silent, the same script under dlaunch and under nvidia-resiliency-ext's
ft_launcher (benchmarks/peers/compare.py runs it; it is not run by hand).

Every rank all-reduces (gloo, CPU) in a loop. Under ft_launcher each step sends a heartbeat and is
a "step" section of its RankMonitorClient; under dlaunch the step is reported with dlaunch.step()
(the rank agent heartbeats on its own). In attempt 0, rank 1 stops at step HANG_STEP inside the
step (time.sleep): it stops its heartbeats, and the others block in the all-reduce it never joins.
It first writes `fault` (time.time() and its pid) into BENCH_OUT. Every rank of the restarted
attempt writes `start<R>` (its first line, before `import torch`) and `step<R>` (its first
all-reduce done), then exits 0.
"""
import os
import time

started = time.time()
out = os.environ["BENCH_OUT"]
rank = int(os.environ["RANK"])
restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
hang_step = int(os.environ.get("HANG_STEP", "10"))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

ft = None
if os.environ.get("FT_RANK_MONITOR_IPC_SOCKET"):  # under ft_launcher
    from nvidia_resiliency_ext.fault_tolerance import RankMonitorClient

    ft = RankMonitorClient()
    ft.init_workload_monitoring()
try:
    import dlaunch  # found on PYTHONPATH inside a dlaunch job only
except ImportError:
    dlaunch = None


def record(name, value):
    with open(os.path.join(out, name), "w") as f:
        f.write(value)


dist.init_process_group("gloo")
for step in range(1000):
    if ft:
        ft.start_section("step")
    if restart == 0 and rank == 1 and step == hang_step:
        record("fault", "%r %d" % (time.time(), os.getpid()))
        time.sleep(3600)  # the hang: no heartbeat, no collective, until the launcher kills it
    t = torch.ones(1 << 10)
    dist.all_reduce(t)
    if ft:
        ft.end_section("step")
        ft.send_heartbeat()
    if dlaunch:
        dlaunch.step(step)
    if restart > 0:
        record("start%d" % rank, repr(started))
        record("step%d" % rank, repr(time.time()))
        break
    time.sleep(0.05)
if ft:
    ft.shutdown_workload_monitoring()
dist.destroy_process_group()
