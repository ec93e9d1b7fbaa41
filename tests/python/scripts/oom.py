# Rank 1 asks the CPU allocator for 16 TiB.
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(1024)
dist.all_reduce(t)
if dist.get_rank() == 1:
    torch.empty(1 << 42)
dist.barrier()
