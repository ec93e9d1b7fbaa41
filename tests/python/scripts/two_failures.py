# Two ranks fail, rank 0 first: it raises, then its clean-up takes 30 s (an atexit handler),
# so rank 1, which raises 1 s later and exits at once, is the first to exit. dlaunch's teardown
# then ends rank 0 with SIGTERM, but rank 0's own error came first.
import atexit
import os
import time

rank = int(os.environ["RANK"])
if rank == 0:
    atexit.register(time.sleep, 30)
    raise RuntimeError("rank 0 lost its data shard")
time.sleep(1)
raise RuntimeError("rank 1 gave up too")
