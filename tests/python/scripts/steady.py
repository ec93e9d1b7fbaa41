"""A steady Gloo job for live dumps: all_reduce in a loop until `--seconds` have passed, printing
"ready <pid>" once the first collective is done; the ranks agree on when to stop. With --own-sigusr1 it installs a SIGUSR1 handler
of its own, which prints "own handler" and must keep its meaning under the agent."""
import argparse
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--seconds", type=float, default=8.0)
p.add_argument("--own-sigusr1", action="store_true")
args = p.parse_args()
if args.own_sigusr1:
    signal.signal(signal.SIGUSR1, lambda s, f: print("own handler", flush=True))
dist.init_process_group("gloo")
t = torch.ones(1024)
dist.all_reduce(t)
print("ready %d" % os.getpid(), flush=True)
end = time.time() + args.seconds
n = 0
# The ranks stop together: each says whether its time is up, and the least of the answers
# decides. A rank that stopped on its own clock would leave the others in an all_reduce it
# never calls (a true mismatch, the more likely when a dump has paused one rank).
go = torch.ones(1)
while True:
    go.fill_(1.0 if time.time() < end else 0.0)
    dist.all_reduce(go, op=dist.ReduceOp.MIN)
    if go.item() == 0:
        break
    dist.all_reduce(t)
    n += 1
    time.sleep(0.01)
dist.barrier()
print("done %d" % n, flush=True)
dist.destroy_process_group()
sys.exit(0)
