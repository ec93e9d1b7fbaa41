# Gloo ranks whose disk fails them. With GO_FILE set, each rank prints "ready <rank>" and waits for
# that file (the test breaks the disk meanwhile): after its three all-reduces, or with
# GO_AT=start before them (the agent has written its first heartbeat then). Then rank 1
# misbehaves (MODE sleep or stop) while the other ranks enter all-reduce #3 and wait there.
import os
import signal
import sys
import time

import torch
import torch.distributed as dist


def wait_for_go(rank):
    go = os.environ.get("GO_FILE")
    if go:
        print("ready", rank, flush=True)
        while not os.path.exists(go):
            time.sleep(0.02)


mode = sys.argv[1] if len(sys.argv) > 1 else "sleep"
at_start = os.environ.get("GO_AT") == "start"
if at_start:
    wait_for_go(int(os.environ["RANK"]))
dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.ones(16)
for _ in range(3):
    dist.all_reduce(t)
if not at_start:
    wait_for_go(rank)
if rank == 1:
    if mode == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    time.sleep(3600)
dist.all_reduce(t)
dist.destroy_process_group()
