# torch 2.x's ways of issuing collectives on Gloo, one chosen by the first argument, with one
# fault chosen by the second (ok | hang | stop | size). Rank FAULT_RANK (env, default 1) is the
# faulty one, at step FAULT_STEP: "hang" sleeps before its step's collectives, "stop" SIGSTOPs
# itself there, "size" gives its first collective of the step more elements. Modes:
#   ddp | ddp_compile | fsdp2 | dtensor | funcol | coalesced | batch_p2p | groups2x2 | rooted
# A feature torch cannot run here exits 3 after printing "UNSUPPORTED: <torch's error>".
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

mode = sys.argv[1]
fault = sys.argv[2] if len(sys.argv) > 2 else "ok"
STEPS = int(os.environ.get("STEPS", "4"))
FAULT_STEP = 2
FAULT_RANK = int(os.environ.get("FAULT_RANK", "1"))

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)


def faulty(step):
    return rank == FAULT_RANK and step == FAULT_STEP


def maybe_hang(step):
    if fault == "hang" and faulty(step):
        time.sleep(3600)
    elif fault == "stop" and faulty(step):
        os.kill(os.getpid(), signal.SIGSTOP)


def extra(step):
    """Elements the faulty rank adds to its first collective of the faulty step."""
    return 1024 if fault == "size" and faulty(step) else 0


def unsupported(e):
    print("UNSUPPORTED: %s: %s" % (type(e).__name__, e), flush=True)
    os._exit(3)


def mesh_1d():
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh("cpu", (world,))


def run_ddp(compiled):
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                    torch.nn.Linear(256, 10)),
                # compiled: torch's DDPOptimizer splits the graph at buckets and wants the first
                # no larger than the others
                bucket_cap_mb=25 if compiled else 0.01)
    fwd = model
    if compiled:
        try:
            fwd = torch.compile(model)
        except Exception as e:
            unsupported(e)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(STEPS):
        maybe_hang(step)
        opt.zero_grad()
        try:
            loss = fwd(torch.randn(32, 64)).sum()
        except Exception as e:
            if compiled and step == 0:
                unsupported(e)
            raise
        loss.backward()
        opt.step()
        yield step


def run_fsdp2():
    try:  # torch 1.13's torch.distributed.fsdp does not even import on Python 3.11
        from torch.distributed.fsdp import fully_shard
    except Exception as e:
        unsupported(e)
    mesh = mesh_1d()
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(STEPS):
        maybe_hang(step)
        opt.zero_grad()
        model(torch.randn(32, 64)).sum().backward()
        opt.step()
        yield step


def run_dtensor():
    from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

    mesh = mesh_1d()
    for step in range(STEPS):
        maybe_hang(step)
        n = 64 * world + extra(step) * world
        local = torch.ones(n // world, 16)
        d = DTensor.from_local(local, mesh, [Shard(0)])
        full = d.redistribute(mesh, [Replicate()]).to_local()  # an all-gather
        p = distribute_tensor(torch.ones(8, 8), mesh, [Replicate()])
        s = (d.sum() + p.sum()).full_tensor()  # a partial sum's all-reduce
        assert full.shape[0] == n, full.shape
        del s
        yield step


def run_funcol():
    import torch.distributed._functional_collectives as funcol

    group = dist.group.WORLD
    for step in range(STEPS):
        maybe_hang(step)
        t = torch.ones(4096 + extra(step))
        r = funcol.all_reduce(t, "sum", group)
        g = funcol.all_gather_tensor(torch.ones(256), 0, group)
        rs = funcol.reduce_scatter_tensor(torch.ones(256 * world), "sum", 0, group)
        assert float(r[0]) == world and float(g[-1]) == 1 and float(rs[0]) == world
        yield step


def run_coalesced():
    from torch.distributed.distributed_c10d import _coalescing_manager

    for step in range(STEPS):
        maybe_hang(step)
        ts = [torch.ones(2048 + extra(step)), torch.ones(512)]
        dist.all_reduce_coalesced(ts)
        us = [torch.ones(1024), torch.ones(256)]
        try:
            manager = _coalescing_manager(async_ops=True)
        except TypeError as e:  # torch < 2.1: _coalescing_manager(group, device, reqs)
            unsupported(e)
        with manager as cm:
            for u in us:
                dist.all_reduce(u)
        cm.wait()
        assert float(ts[0][0]) == world and float(us[1][0]) == world
        yield step


def run_batch_p2p():
    right, left = (rank + 1) % world, (rank - 1) % world
    for step in range(STEPS):
        maybe_hang(step)
        send = torch.full((4096 + extra(step),), float(rank))
        recv = torch.zeros(4096)
        ops = [dist.P2POp(dist.isend, send, right), dist.P2POp(dist.irecv, recv, left)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        assert float(recv[0]) == left
        yield step


def run_groups2x2():
    # ranks (0,1) and (2,3) are the tensor-parallel groups, (0,2) and (1,3) the data-parallel ones.
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    tp, dp = mesh.get_group("tp"), mesh.get_group("dp")
    for step in range(STEPS):
        maybe_hang(step)
        a = torch.ones(1024 + extra(step))
        dist.all_reduce(a, group=tp)
        b = torch.ones(2048)
        dist.all_reduce(b, group=dp)
        yield step


def run_rooted():
    # The collectives whose ranks carry different tensors by design: a scatter's list on its source
    # only, a gather's on its destination only, a broadcast, a reduce, an all-to-all with uneven
    # splits (rank r sends r + 1 + j elements to rank j) and a send/recv.
    for step in range(STEPS):
        maybe_hang(step)
        chunk = torch.empty(8, 10)
        dist.scatter(chunk, list(torch.ones(world, 8, 10)) if rank == 0 else None, src=0)
        gathered = [torch.empty(8) for _ in range(world)] if rank == 0 else None
        dist.gather(torch.ones(8), gathered, dst=0)
        dist.broadcast(torch.ones(16), src=step % world)
        dist.reduce(torch.ones(16), dst=world - 1)
        splits = [rank + 1 + j for j in range(world)]
        received = torch.empty(sum(splits))
        dist.all_to_all_single(received, torch.ones(sum(splits)), splits, splits)
        if rank == 0:
            dist.send(torch.ones(4 + step), 1)
        elif rank == 1:
            dist.recv(torch.empty(4 + step), 0)
        yield step


RUNS = {
    "ddp": lambda: run_ddp(False), "ddp_compile": lambda: run_ddp(True), "fsdp2": run_fsdp2,
    "dtensor": run_dtensor, "funcol": run_funcol, "coalesced": run_coalesced,
    "batch_p2p": run_batch_p2p, "groups2x2": run_groups2x2, "rooted": run_rooted,
}
steps = RUNS[mode]()
try:  # an API this torch lacks fails at its first step, on every rank alike
    first = next(steps)
except (ImportError, AttributeError) as e:
    unsupported(e)
print("rank", rank, "step", first, flush=True)
for step in steps:
    print("rank", rank, "step", step, flush=True)
dist.barrier()
dist.destroy_process_group()
