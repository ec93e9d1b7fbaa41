# Gloo collectives with one fault chosen by the first argument:
#   ok | size | short | dtype | op | sleep | stop | silent | oom
# The fault hits rank 1 at step 3; the other ranks go on as usual. oom asks the CPU allocator
# for 16 TiB.
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
dist.init_process_group("gloo")
rank = dist.get_rank()
steps = int(os.environ.get("STEPS", "6"))
for step in range(steps):
    n = 1 << 16
    dtype = torch.float32
    if rank == 1 and step == 3:
        if mode == "size":
            n += 1024
        elif mode == "short":
            n -= 256
        elif mode == "dtype":
            dtype = torch.float64
        elif mode == "sleep":
            time.sleep(3600)
        elif mode == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
        elif mode == "oom":
            torch.empty(1 << 42)
    if mode == "silent" and step == 2:
        time.sleep(float(os.environ.get("SILENT_S", "4")))
    t = torch.ones(n, dtype=dtype)
    if rank == 1 and step == 3 and mode == "op":
        dist.broadcast(t, src=0)
    else:
        dist.all_reduce(t)
    print("rank", rank, "step", step, "sum", float(t[0]))
dist.barrier()
dist.destroy_process_group()
