"""A Python hang as users meet it: every rank all-reduces in a loop; at step 5 rank 1 stops
(time.sleep) and the others block in all_reduce #5. Rank 1 prints `FAULT <unix ms>` to stderr
first. GLOO_TIMEOUT_S sets the process group's timeout (torch's default: 1800 s)."""
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

timeout = datetime.timedelta(seconds=float(os.environ.get("GLOO_TIMEOUT_S", "1800")))
dist.init_process_group("gloo", timeout=timeout)
rank = dist.get_rank()
for step in range(1000):
    if rank == 1 and step == 5:
        print("FAULT %d" % int(time.time() * 1000), file=sys.stderr, flush=True)
        time.sleep(3600)
    t = torch.ones(1 << 12)
    dist.all_reduce(t)
    time.sleep(0.02)
