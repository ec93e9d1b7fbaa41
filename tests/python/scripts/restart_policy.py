# Failures the restart policy weighs, chosen by the first argument; rank 1 fails, after one
# all_reduce unless the mode fails at start-up:
#   same      ValueError at the same line in every attempt (deterministic)
#   storm     a different exception type in every attempt, never past step 0 (a restart storm)
#   kill_once SIGKILL in attempt 0 only; later attempts finish (transient)
#   import    an import that fails before any collective (start-up)
#   oom_once  asks the CPU allocator for 16 TiB in attempt 0 only (transient)
#   hang_once sleeps in attempt 0 only, before its second all_reduce (transient)
import os
import signal
import sys
import time

mode = sys.argv[1]
attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
if mode == "import" and os.environ["RANK"] == "1":
    import dlaunch_no_such_module  # noqa: F401

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.ones(1024)
dist.all_reduce(t)
if rank == 1:
    if mode == "same":
        raise ValueError("bad config value at step 3")
    if mode == "storm":
        kinds = [KeyError, RuntimeError, TypeError, OSError, LookupError, ArithmeticError]
        raise kinds[attempt % len(kinds)]("attempt %d" % attempt)
    if mode == "kill_once" and attempt == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "oom_once" and attempt == 0:
        torch.empty(1 << 42)
    if mode == "hang_once" and attempt == 0:
        time.sleep(3600)
dist.all_reduce(t)
dist.barrier()
print("rank", rank, "done in attempt", attempt)
