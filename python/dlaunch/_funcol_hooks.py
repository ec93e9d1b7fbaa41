"""Records torch 2.x's functional collectives (torch.distributed._functional_collectives), which
DTensor, FSDP2's helpers, tensor parallelism and torch.compile issue: they go through
torch.ops._c10d_functional, past torch.distributed's Python functions that _torch_hooks wraps.

A functional collective returns at once; its tensor is waited on at first use (an
AsyncCollectiveTensor calls the module's wait_tensor) or inside the call when nothing defers it.
So an entry is scheduled when the collective is called, starts when its output is waited on and
completes when that wait returns: a rank blocked on a peer shows the entry in flight, in the
"communication" phase, as a blocked torch.distributed call does, and a rank that runs Python
between the call and the wait is not taken for a hung one."""
import functools
import threading

# function name -> (op name in flight.json, position of the group argument)
_FUNCOLS = {
    "broadcast": ("broadcast", 2),
    "all_reduce": ("allreduce", 2),
    "all_reduce_coalesced": ("allreduce", 2),
    "all_gather_single": ("allgather", 2),
    "all_gather_tensor": ("allgather", 2),  # the primary name before torch 2.10
    "all_gather_single_coalesced": ("allgather", 2),
    "all_gather_into_tensor_coalesced": ("allgather", 1),
    "reduce_scatter_single": ("reduce_scatter", 3),
    "reduce_scatter_tensor": ("reduce_scatter", 3),
    "reduce_scatter_single_coalesced": ("reduce_scatter", 3),
    "reduce_scatter_tensor_coalesced": ("reduce_scatter", 3),
    "all_to_all_single": ("alltoall", 3),
    "all_gather_single_autograd": ("allgather", 2),
    "all_gather_tensor_autograd": ("allgather", 2),
    "reduce_scatter_single_autograd": ("reduce_scatter", 3),
    "reduce_scatter_tensor_autograd": ("reduce_scatter", 3),
    "all_to_all_single_autograd": ("alltoall", 3),
}
_ALIASES = ("all_gather_tensor", "all_gather_tensor_autograd", "reduce_scatter_tensor",
            "reduce_scatter_tensor_autograd")
_MAX_PENDING = 4096  # outputs never waited on are forgotten past this many

_state = threading.local()  # .depth: inside a recorded functional collective


def _key(t):
    """An output's storage: a view of it (an AsyncCollectiveTensor indexed without a wait) is
    waited on in place of the output itself."""
    try:
        return t.untyped_storage().data_ptr()
    except Exception:
        return id(t)


class FuncolHooks:
    def __init__(self, hooks, tensor_info, call_site):
        self.hooks = hooks
        self.rec = hooks.rec
        self.agent = hooks.agent
        self.tensor_info = tensor_info
        self.call_site = call_site
        self.module = None
        self._pending = {}  # _key(output tensor) -> entry; dicts keep insertion order
        self._lock = threading.Lock()

    def patch(self, module):
        if getattr(module, "__dlaunch_patched__", False):
            return
        self.module = module
        for name, (op, group_index) in _FUNCOLS.items():
            # torch 2.10+ keeps the *_tensor names as deprecated aliases of the *_single ones:
            # the alias's call is recorded inside, and its FutureWarning (stacklevel 2) names
            # the user's line, not a wrapper of dlaunch's.
            if name in _ALIASES and hasattr(module, name.replace("_tensor", "_single")):
                continue
            fn = getattr(module, name, None)
            if fn is not None and callable(fn):
                setattr(module, name, self.wrap(fn, op, group_index))
        for name in ("wait_tensor", "wait_tensors"):
            fn = getattr(module, name, None)
            if fn is not None:
                setattr(module, name, self.wrap_wait(fn))
        module.__dlaunch_patched__ = True

    def _group(self, args, kwargs, group_index):
        """The ProcessGroup a functional collective's group argument (a ProcessGroup, a group
        name, a DeviceMesh, (mesh, dim) or a list of ranks) resolves to; None: the default."""
        group = kwargs.get("group", args[group_index] if len(args) > group_index else None)
        if group is None:
            return None
        c10d = self.hooks.c10d
        tag = kwargs.get("tag", "")
        resolve = getattr(self.module, "_resolve_group_name", None)
        if resolve is None:
            return group if hasattr(group, "size") else None
        name = resolve(group, tag)
        return c10d._resolve_process_group(name)

    def _tracing(self):
        tracing = getattr(self.module, "_are_we_tracing", None)
        try:
            return bool(tracing()) if tracing is not None else False
        except Exception:
            return False

    def wrap(self, fn, op, group_index):
        funcol = self
        hooks = self.hooks

        @functools.wraps(fn)
        def recorded(*args, **kwargs):
            if getattr(_state, "depth", 0) or funcol._tracing():
                return fn(*args, **kwargs)
            try:
                pg, default_pg = hooks.group_name(funcol._group(args, kwargs, group_index))
                dtype, count, shape, nbytes, device = funcol.tensor_info(
                    args[0] if args else kwargs.get("self"))
                root = -1
                if op == "broadcast":
                    root = int(args[1] if len(args) > 1 else kwargs.get("src", -1))
                recorded_op = op
                if op == "alltoall" and any(
                        a is not None for a in list(args[1:3]) + [
                            kwargs.get("output_split_sizes"), kwargs.get("input_split_sizes")]):
                    recorded_op = "alltoallv"  # uneven splits: counts differ across ranks
                entry = funcol.rec.record(recorded_op, pg, dtype, count, shape, nbytes, root=root,
                                          call_site=funcol.call_site(), async_op=True,
                                          device=device, default_pg=default_pg,
                                          scheduled=True)
            except Exception:
                return fn(*args, **kwargs)
            _state.depth = 1
            try:
                out = fn(*args, **kwargs)
            except BaseException as e:
                funcol.rec.fail(entry, "%s: %s" % (type(e).__name__, e))
                raise
            finally:
                _state.depth = 0
            funcol._pend(out, entry)
            return out

        recorded.__dlaunch_recorded__ = True
        return recorded

    def _pend(self, out, entry):
        """Completes `entry` when one of its outputs is waited on; at once when the call waited
        already (no AsyncCollectiveTensor came back)."""
        outs = out if isinstance(out, (list, tuple)) else [out]
        elems = [getattr(o, "elem", None) for o in outs]
        elems = [e for e in elems if e is not None]
        if not elems:
            self.rec.complete(entry)
            return
        with self._lock:
            for e in elems:
                self._pending[_key(e)] = entry
            while len(self._pending) > _MAX_PENDING:
                self._pending.pop(next(iter(self._pending)))

    def _complete_earlier(self, entry):
        """A process group runs its collectives in order: one waited on means the earlier ones
        of its group are done, waited on or not (torch only warns about an output never
        waited on)."""
        with self._lock:
            done = [k for k, e in self._pending.items() if e.pg == entry.pg and e.seq < entry.seq]
            entries = [self._pending.pop(k) for k in done]
        for e in entries:
            self.rec.complete(e)

    def wrap_wait(self, fn):
        funcol = self

        @functools.wraps(fn)
        def waited(tensor, *args, **kwargs):
            tensors = tensor if isinstance(tensor, (list, tuple)) else [tensor]
            entry = None
            with funcol._lock:
                for t in tensors:
                    e = funcol._pending.pop(_key(t), None)
                    entry = entry or e
            if entry is None:
                return fn(tensor, *args, **kwargs)
            funcol.rec.start(entry)
            funcol.agent.enter_collective(entry)
            try:
                result = fn(tensor, *args, **kwargs)
            except BaseException as e:
                funcol.rec.fail(entry, "%s: %s" % (type(e).__name__, e))
                raise
            finally:
                funcol.agent.leave_collective(entry)
            funcol.rec.complete(entry)
            funcol._complete_earlier(entry)
            return result

        waited.__dlaunch_recorded__ = True
        return waited
