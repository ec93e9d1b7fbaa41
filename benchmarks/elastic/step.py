# One training step's worth of torch.distributed (gloo), for the restart benchmark: attempt 0's
# last rank records the time and fails after the first step; every rank of the restarted
# attempt records when it started and when its first step was done.
import os
import sys
import time

started = time.time()
out = os.environ["BENCH_OUT"]
restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
rank = int(os.environ["RANK"])

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo")
t = torch.ones(4)
dist.all_reduce(t)
stepped = time.time()


def record(name, value):
    with open(os.path.join(out, name), "w") as f:
        f.write(repr(value))


if restart == 0:
    if rank == dist.get_world_size() - 1:  # a rank of node 1
        record("fail", time.time())
        sys.stdout.flush()
        os._exit(3)
    time.sleep(600)  # until the launcher stops it
else:
    record("start%d" % rank, started)
    record("step%d" % rank, stepped)
