# A torch script whose PYTHONPATH holds the user's own sitecustomize and usercustomize
# (fixtures/user_site): it says whether the agent runs and which sitecustomize Python imported.
import os

import torch
import torch.distributed as dist

import dlaunch
import sitecustomize

dist.init_process_group("gloo")
t = torch.ones(1024)
dist.all_reduce(t)
print("pid", os.getpid(), "agent", dlaunch.in_job(), "sitecustomize", sitecustomize.__file__,
      flush=True)
dist.destroy_process_group()
