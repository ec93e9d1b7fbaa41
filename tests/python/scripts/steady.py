"""A steady Gloo job for live dumps: all_reduce in a loop until `--seconds` have passed, printing
"ready <pid>" once the first collective is done. With --own-sigusr1 it installs a SIGUSR1 handler
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
while time.time() < end:
    dist.all_reduce(t)
    n += 1
    time.sleep(0.01)
dist.barrier()
print("done %d" % n, flush=True)
dist.destroy_process_group()
sys.exit(0)
