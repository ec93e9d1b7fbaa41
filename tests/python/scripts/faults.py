# One fault of the diagnosis matrix (tests/python/diagnosis_matrix_test.cc), chosen by the first
# argument. Every step all-reduces a tensor and meets at a barrier; the fault hits one rank at
# step 3 (FAULT_STEP), after the rank prints "fault_unix_ms=<ms>" so the time to diagnosis can be
# measured. Modes:
#   ok | silent | skip | skip_first | extra | size | dtype | op | group_order | early_exit |
#   exit0..exit5 (after the collectives) | exit3_nodist | crash | selfkill | stop | sleep | loader
import os
import signal
import sys
import time

mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
FAULT_STEP = int(os.environ.get("FAULT_STEP", "3"))
STEPS = 6


def fault_now():
    print("fault_unix_ms=%d" % int(time.time() * 1000), flush=True)


if mode == "exit3_nodist":
    # Like torch's own echo1.py --exitcode 3: no torch.distributed at all.
    rank = int(os.environ["RANK"])
    if rank == 1:
        fault_now()
        sys.exit(3)
    sys.exit(0)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

dist.init_process_group("gloo")
rank = dist.get_rank()
world = dist.get_world_size()
culprit = 0 if mode in ("skip", "skip_first") else 1
faulty = rank == culprit
other = dist.new_group(list(range(world))) if mode == "group_order" else None


class Slow(torch.utils.data.Dataset):
    """Items take an hour on the culprit rank from FAULT_STEP on: its DataLoader worker stalls."""

    def __init__(self, stall):
        self.stall = stall

    def __len__(self):
        return 64

    def __getitem__(self, i):
        if self.stall and i >= FAULT_STEP:
            fault_now()
            time.sleep(3600)
        return torch.ones(4) * i


def batches():
    if mode != "loader":
        return range(STEPS)
    return torch.utils.data.DataLoader(Slow(faulty), batch_size=1, num_workers=1)


for step, _ in enumerate(batches()):
    if step >= STEPS:
        break
    t = torch.ones(1 << 10, dtype=torch.float32)
    at_fault = faulty and step == (0 if mode == "skip_first" else FAULT_STEP)
    if at_fault:
        fault_now()
        if mode == "size":
            t = torch.ones((1 << 10) + 256)
        elif mode == "dtype":
            t = t.double()
        elif mode == "sleep":
            time.sleep(3600)
        elif mode == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
        elif mode == "selfkill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif mode == "crash":
            raise RuntimeError("step %d: the model diverged on rank %d" % (step, rank))
        elif mode == "early_exit":
            sys.exit(0)
        elif mode == "extra":
            dist.all_reduce(torch.ones(1 << 10))  # one call more than the other ranks
    if mode == "silent" and step == 2:
        time.sleep(float(os.environ.get("SILENT_S", "4")))
    if mode == "group_order" and step == FAULT_STEP:
        # Rank 0 calls the new group first, rank 1 the default one: each waits for the other.
        if rank == 0:
            fault_now()
            dist.all_reduce(torch.ones(4), group=other)
            dist.all_reduce(torch.ones(4))
        else:
            dist.all_reduce(torch.ones(4))
            dist.all_reduce(torch.ones(4), group=other)
    if at_fault and mode == "op":
        dist.broadcast(t, src=0)
    elif not (at_fault and mode in ("skip", "skip_first")):
        dist.all_reduce(t)
    dist.barrier()
    print("rank", rank, "step", step, flush=True)

if mode.startswith("exit") and faulty:
    fault_now()
    dist.destroy_process_group()
    sys.exit(int(mode[4:]))
dist.destroy_process_group()
