# Gloo all-reduces with one fault on rank FAULT_RANK (default: the last rank) at step 3, chosen by
# the first argument:
#   ok | sleep (inside a function, before the fourth all_reduce) | size (sends 1024 more floats)
#   | raise (a RuntimeError, while the other ranks wait in the all_reduce)
# With FAULT_WORLD=N the fault hits only in a world of N ranks; in another world every step waits
# STEP_S seconds (an elastic job's first attempt, say), STEPS times.
import os
import sys
import time

import torch
import torch.distributed as dist


def wait_for_data():
    time.sleep(3600)


mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
dist.init_process_group("gloo")
rank = dist.get_rank()
fault_rank = int(os.environ.get("FAULT_RANK", dist.get_world_size() - 1))
steps = 6
fault_world = os.environ.get("FAULT_WORLD")
if fault_world is not None and int(fault_world) != dist.get_world_size():
    mode = "ok"
    steps = int(os.environ.get("STEPS", "6"))
for step in range(steps):
    time.sleep(float(os.environ.get("STEP_S", "0")) if mode == "ok" else 0)
    n = 1 << 12
    if rank == fault_rank and step == 3:
        if mode == "sleep":
            wait_for_data()
        elif mode == "size":
            n += 1024
        elif mode == "raise":
            raise RuntimeError("injected failure on rank %d" % rank)
    t = torch.ones(n)
    dist.all_reduce(t)
dist.barrier()
dist.destroy_process_group()
