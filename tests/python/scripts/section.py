# Rank 0 checkpoints for a while inside a declared section; the others wait in a barrier.
import os
import time

import dlaunch
import torch.distributed as dist

dist.init_process_group("gloo")
for step in range(3):
    dlaunch.step(step)
    if dist.get_rank() == 0 and step == 1:
        with dlaunch.section("checkpoint", timeout_s=120):
            time.sleep(float(os.environ.get("SECTION_S", "5")))
    dist.barrier()
print("in_job", dlaunch.in_job(), "rank", dist.get_rank())
dist.destroy_process_group()
