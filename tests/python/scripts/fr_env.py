# Prints the flight-recorder settings this rank sees once torch.distributed is imported, and how
# many entries torch's own recorder holds after one all-reduce on Gloo (-1: this torch has no
# recorder for Gloo). One line: "torch=<version> FR=<TORCH_FR_BUFFER_SIZE> OLD=<...> entries=N".
import os
import pickle

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
dist.all_reduce(torch.ones(8))
entries = -1
dump = getattr(torch._C._distributed_c10d, "_dump_fr_trace", None)
if dump is not None:
    entries = len(pickle.loads(dump()).get("entries", []))
print("torch=%s FR=%s OLD=%s entries=%d" % (
    torch.__version__.split("+")[0], os.environ.get("TORCH_FR_BUFFER_SIZE", "-"),
    os.environ.get("TORCH_NCCL_TRACE_BUFFER_SIZE", "-"), entries), flush=True)
dist.destroy_process_group()
