"""Records torch.distributed's collectives and point-to-point calls, DDP's gradient all-reduces
and optimizer steps, without importing torch: the patches go in when torch's own modules finish
loading (a finder on sys.meta_path), so a script that never imports torch pays nothing."""
import functools
import importlib.abc
import inspect
import os
import sys
import threading

from . import _memory

# torch.distributed function -> (op name in flight.json, tensor argument, peer/root argument)
_OPS = {
    "all_reduce": ("allreduce", "tensor", None),
    "all_reduce_coalesced": ("allreduce", "tensors", None),
    "broadcast": ("broadcast", "tensor", "src"),
    "reduce": ("reduce", "tensor", "dst"),
    "all_gather": ("allgather", "tensor", None),
    "all_gather_coalesced": ("allgather", "input_tensor_list", None),
    "all_gather_into_tensor": ("allgather", "input_tensor", None),
    "_all_gather_base": ("allgather", "input_tensor", None),
    "all_gather_single": ("allgather", "input_tensor", None),  # torch 2.12+, FSDP2's
    "reduce_scatter": ("reduce_scatter", "output", None),
    "reduce_scatter_tensor": ("reduce_scatter", "output", None),
    "_reduce_scatter_base": ("reduce_scatter", "output", None),
    "reduce_scatter_single": ("reduce_scatter", "output", None),  # torch 2.12+, FSDP2's
    "all_to_all_single": ("alltoall", "input", None),
    "all_to_all": ("alltoall", "input_tensor_list", None),
    "gather": ("gather", "tensor", "dst"),
    "scatter": ("scatter", "tensor", "src"),
    "barrier": ("barrier", None, None),
    "monitored_barrier": ("barrier", None, None),
    "send": ("send", "tensor", "dst"),
    "isend": ("send", "tensor", "dst"),
    "recv": ("recv", "tensor", "src"),
    "irecv": ("recv", "tensor", "src"),
    "all_gather_object": ("allgather_object", None, None),
    "broadcast_object_list": ("broadcast_object", None, "src"),
    "gather_object": ("gather_object", None, "dst"),
    "scatter_object_list": ("scatter_object", None, "src"),
}
_P2P = ("send", "recv")


def _uneven(name, op, get):
    """"alltoallv" for an all-to-all whose ranks may pass different sizes (split sizes given, or
    a list of tensors): the launcher compares its dtype across ranks, not its count."""
    if name == "all_to_all" or (name == "all_to_all_single" and (
            get("output_split_sizes") is not None or get("input_split_sizes") is not None)):
        return "alltoallv"
    return op

_DTYPES = {"float32": "float", "float64": "double", "float16": "half"}

_state = threading.local()  # .depth: inside a recorded call (object collectives call others)
_here = os.path.dirname(os.path.abspath(__file__))
_skip_prefixes = (_here,)


def _dtype_name(dtype):
    name = str(dtype).replace("torch.", "")
    return _DTYPES.get(name, name)


def call_site(skip=2):
    """file:line function of the innermost frame outside torch and dlaunch."""
    f = sys._getframe(skip)
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(_skip_prefixes):
            return "%s:%d %s" % (fn, f.f_lineno, f.f_code.co_name)
        f = f.f_back
    return ""


def _tensor_info(t):
    """(dtype, count, shape, bytes, device) of a tensor or a list of them."""
    if isinstance(t, (list, tuple)):
        if not t:
            return "", -1, [], -1, ""
        dtype, _, shape, _, device = _tensor_info(t[0])
        count = sum(x.numel() for x in t if hasattr(x, "numel"))
        nbytes = sum(x.numel() * x.element_size() for x in t if hasattr(x, "numel"))
        return dtype, count, [len(t)] + shape, nbytes, device
    if not hasattr(t, "numel"):
        return "", -1, [], -1, ""
    dev = t.device
    device = "" if dev.type == "cpu" else str(dev)
    if dev.type == "cuda" and _memory.Device.index is None:
        _memory.Device.index = dev.index
    n = t.numel()
    return _dtype_name(t.dtype), n, list(t.shape), n * t.element_size(), device


class _Hooks:
    def __init__(self, agent):
        self.agent = agent
        self.rec = agent.recorder
        self.c10d = None
        self.pg_names = {}  # id(pg) -> name

    # ---- process groups
    def group_name(self, group):
        c10d = self.c10d
        try:
            pg = group if group is not None else c10d._get_default_group()
        except Exception:
            return "0", True
        key = id(pg)
        name = self.pg_names.get(key)
        if name is None:
            names = getattr(c10d, "_pg_names", None)
            if names is None:
                names = getattr(getattr(c10d, "_world", None), "pg_names", {})
            name = str(names.get(pg, key))
            self.pg_names[key] = name
            self._describe_group(pg, name)
        try:
            default = pg is c10d._get_default_group()
        except Exception:
            default = True
        return name, default

    def _describe_group(self, pg, name):
        c10d = self.c10d
        ranks = getattr(c10d, "_pg_group_ranks", None)
        if ranks is None:
            ranks = getattr(getattr(c10d, "_world", None), "pg_group_ranks", {})
        members = sorted(ranks.get(pg, {}).keys()) if pg in ranks else []
        backend = ""
        try:
            backend = str(c10d.get_backend(pg))
        except Exception:
            pass
        group = {"ranks": members, "backend": backend}
        try:  # torch >= 2.3 describes a group ("mesh_tp" for a DeviceMesh dimension)
            desc = pg.group_desc
        except Exception:
            desc = ""
        if isinstance(desc, str) and desc:
            group["desc"] = desc
        self.rec.process_groups[name] = group
        if not self.rec.backend and backend:
            self.rec.backend = backend
        if self.rec.world_size <= 0:
            try:
                self.rec.world_size = c10d.get_world_size()
            except Exception:
                pass

    # ---- torch.distributed functions
    def wrap(self, name, fn):
        op, tensor_arg, peer_arg = _OPS[name]
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            return fn
        params = list(sig.parameters)
        index = {p: i for i, p in enumerate(params)}
        defaults = {p: v.default for p, v in sig.parameters.items()}
        hooks = self

        def get(args, kwargs, key):
            if key is None or key not in index:
                return None
            i = index[key]
            if i < len(args):
                return args[i]
            v = kwargs.get(key, defaults.get(key))
            return None if v is inspect.Parameter.empty else v

        @functools.wraps(fn)
        def recorded(*args, **kwargs):
            if getattr(_state, "depth", 0):
                return fn(*args, **kwargs)
            try:
                group = get(args, kwargs, "group")
                pg, default_pg = hooks.group_name(group)
                dtype, count, shape, nbytes, device = _tensor_info(get(args, kwargs, tensor_arg))
                peer = get(args, kwargs, peer_arg)
                peer = -1 if peer is None else int(peer)
                async_op = bool(get(args, kwargs, "async_op")) or name in ("isend", "irecv")
                is_p2p = op in _P2P
                entry = hooks.rec.record(
                    _uneven(name, op, lambda key: get(args, kwargs, key)), pg, dtype, count,
                    shape, nbytes, peer=peer if is_p2p else -1,
                    root=-1 if is_p2p else peer, call_site=call_site(), async_op=async_op,
                    device=device, default_pg=default_pg)
            except Exception:
                return fn(*args, **kwargs)
            hooks.agent.enter_collective(entry)
            _state.depth = 1
            try:
                work = fn(*args, **kwargs)
            except BaseException as e:
                hooks.rec.fail(entry, "%s: %s" % (type(e).__name__, e))
                raise
            finally:
                _state.depth = 0
                hooks.agent.leave_collective(entry)
            if async_op and work is not None:
                return hooks.track(work, entry)
            hooks.rec.complete(entry)
            return work

        recorded.__dlaunch_recorded__ = True
        return recorded

    def track(self, work, entry):
        """Completes `entry` when the async work does: through its future where the backend
        gives one, else when the caller waits on it."""
        rec = self.rec
        try:
            fut = work.get_future()

            def done(f):
                try:
                    f.wait()
                    rec.complete(entry)
                except Exception as e:
                    rec.fail(entry, "%s: %s" % (type(e).__name__, e))

            fut.add_done_callback(done)
            return work
        except Exception:
            return _WorkProxy(work, entry, rec)

    def patch_c10d(self, module):
        global _skip_prefixes
        self.c10d = module
        torch = sys.modules.get("torch")
        if torch is not None and getattr(torch, "__file__", None):
            _skip_prefixes = (_here, os.path.dirname(os.path.abspath(torch.__file__)))
            # Before any process group reads torch's flight-recorder settings.
            from . import _torch_env

            _torch_env.settle(os.environ, torch)
        for name in _OPS:
            fn = getattr(module, name, None)
            if fn is None or getattr(fn, "__dlaunch_recorded__", False):
                continue
            setattr(module, name, self.wrap(name, fn))
        batch = getattr(module, "batch_isend_irecv", None)
        if batch is not None:
            setattr(module, "batch_isend_irecv", self.wrap_batch(batch))
        # Already imported by torch.distributed's __init__ in some versions: patch its names too.
        dist = sys.modules.get("torch.distributed")
        if dist is not None:
            for name in list(_OPS) + ["batch_isend_irecv"]:
                if hasattr(dist, name) and hasattr(module, name):
                    setattr(dist, name, getattr(module, name))

    def wrap_batch(self, fn):
        hooks = self

        @functools.wraps(fn)
        def recorded(p2p_op_list):
            entries = []
            try:
                for p in p2p_op_list:
                    opname = getattr(getattr(p, "op", None), "__name__", "")
                    op = "send" if "send" in opname else "recv"
                    pg, default_pg = hooks.group_name(getattr(p, "group", None))
                    dtype, count, shape, nbytes, device = _tensor_info(p.tensor)
                    entries.append(hooks.rec.record(
                        op, pg, dtype, count, shape, nbytes, peer=int(p.peer),
                        call_site=call_site(), async_op=True, device=device,
                        default_pg=default_pg))
            except Exception:
                entries = []
            _state.depth = 1
            try:
                works = fn(p2p_op_list)
            except BaseException as e:
                for entry in entries:
                    hooks.rec.fail(entry, "%s: %s" % (type(e).__name__, e))
                raise
            finally:
                _state.depth = 0
            if len(works) == len(entries):
                return [hooks.track(w, e) for w, e in zip(works, entries)]
            return works

        recorded.__dlaunch_recorded__ = True
        return recorded

    # ---- DDP: its gradient all-reduces run in the C++ reducer, past the Python functions
    def patch_ddp(self, module):
        ddp = getattr(module, "DistributedDataParallel", None)
        if ddp is None or getattr(ddp, "__dlaunch_patched__", False):
            return
        hooks = self
        orig_init = ddp.__init__
        orig_forward = ddp.forward
        orig_register = ddp.register_comm_hook

        @functools.wraps(orig_init)
        def __init__(self, *args, **kwargs):
            orig_init(self, *args, **kwargs)
            self._dlaunch_site = call_site()
            self._dlaunch_hooked = False

        @functools.wraps(orig_register)
        def register_comm_hook(self, state, hook):
            # The user's own hook is kept and recorded around.
            self._dlaunch_hooked = True
            return orig_register(self, state, hooks.recorded_user_hook(self, hook))

        @functools.wraps(orig_forward)
        def forward(self, *args, **kwargs):
            if not getattr(self, "_dlaunch_hooked", True):
                self._dlaunch_hooked = True
                try:
                    orig_register(self, self.process_group, hooks.default_hook(self))
                except Exception as e:
                    print("dlaunch: DDP gradient all-reduces are not recorded: %s" % e,
                          file=sys.stderr)
            agent = hooks.agent
            agent.ddp_forward()
            agent.set_phase("forward")
            try:
                return orig_forward(self, *args, **kwargs)
            finally:
                agent.set_phase("backward")

        ddp.__init__ = __init__
        ddp.forward = forward
        ddp.register_comm_hook = register_comm_hook
        ddp.__dlaunch_patched__ = True

    def _bucket_entry(self, model, pg, bucket):
        """The flight entry of a DDP bucket's all-reduce. What a bucket is (its group, dtype,
        shape, call site) is the same every step until DDP rebuilds its buckets, so it is worked
        out once per bucket layout: a step pays only for the record itself."""
        buf = bucket.buffer() if hasattr(bucket, "buffer") else bucket.get_tensor()
        index = bucket.index() if hasattr(bucket, "index") else -1
        key = (id(pg), index, buf.numel(), buf.dtype)
        known = model.__dict__.setdefault("_dlaunch_buckets", {})
        fixed = known.get(key)
        if fixed is None:
            name, default_pg = self.group_name(pg)
            site = "DDP bucket %d of %s" % (index, getattr(model, "_dlaunch_site", "") or "DDP")
            fixed = known[key] = (name, default_pg, site) + _tensor_info(buf)
        name, default_pg, site, dtype, count, shape, nbytes, device = fixed
        entry = self.rec.record("allreduce", name, dtype, count, shape, nbytes, call_site=site,
                                bucket=index, async_op=True, device=device,
                                default_pg=default_pg)
        return buf, entry

    def _completing(self, entry):
        """The future callback of a bucket: completes (or fails) its entry and hands the
        reduced tensor on, as DDP expects of a comm hook's future."""
        rec = self.rec

        def done(f):
            try:
                value = f.value()
            except Exception as e:
                rec.fail(entry, "%s: %s" % (type(e).__name__, e))
                raise
            rec.complete(entry)
            return value[0] if isinstance(value, list) and len(value) == 1 else value

        return done

    def default_hook(self, model):
        """torch's default DDP all-reduce (divide by the world, then sum), recorded."""
        hooks = self
        c10d = self.c10d

        def dlaunch_allreduce_hook(pg, bucket):
            buf, entry = hooks._bucket_entry(model, pg, bucket)
            group = pg if pg is not None else c10d._get_default_group()
            buf.div_(group.size())
            # The group's own call, as DDP's C++ reducer makes it: torch.distributed.all_reduce
            # only adds argument checks and logging around it (a third of the hook's time).
            fut = group.allreduce([buf]).get_future()
            return fut.then(hooks._completing(entry))

        return dlaunch_allreduce_hook

    def recorded_user_hook(self, model, hook):
        hooks = self

        @functools.wraps(hook)
        def recorded_hook(state, bucket):
            pg = getattr(state, "process_group", None) if state is not None else None
            try:
                _, entry = hooks._bucket_entry(model, pg, bucket)
            except Exception:
                return hook(state, bucket)
            _state.depth = 1  # the hook's own collectives are this entry
            try:
                fut = hook(state, bucket)
            finally:
                _state.depth = 0
            return fut.then(hooks._completing(entry))

        return recorded_hook

    # ---- optimizer steps are the job's progress
    def patch_optimizer(self, module):
        opt = getattr(module, "Optimizer", None)
        if opt is None or getattr(opt, "__dlaunch_patched__", False):
            return
        hooks = self
        orig_init = opt.__init__

        @functools.wraps(orig_init)
        def __init__(self, *args, **kwargs):
            orig_init(self, *args, **kwargs)
            cls = type(self)
            if "__dlaunch_step__" not in cls.__dict__:
                cls.step = hooks.wrap_step(cls.step)
                cls.__dlaunch_step__ = True

        opt.__init__ = __init__
        opt.__dlaunch_patched__ = True

    def wrap_step(self, step):
        agent = self.agent

        @functools.wraps(step)
        def recorded_step(self, *args, **kwargs):
            agent.set_phase("optimizer")
            try:
                return step(self, *args, **kwargs)
            finally:
                agent.optimizer_stepped(id(self))

        return recorded_step


class _WorkProxy:
    """A Work whose completion is seen when the caller waits on it."""

    def __init__(self, work, entry, rec):
        self._work, self._entry, self._rec = work, entry, rec

    def wait(self, *args, **kwargs):
        try:
            result = self._work.wait(*args, **kwargs)
        except BaseException as e:
            self._rec.fail(self._entry, "%s: %s" % (type(e).__name__, e))
            raise
        self._rec.complete(self._entry)
        return result

    def is_completed(self):
        done = self._work.is_completed()
        if done:
            self._rec.complete(self._entry)
        return done

    def __getattr__(self, name):
        return getattr(self._work, name)


class _Loader(importlib.abc.Loader):
    def __init__(self, loader, after):
        self._loader, self._after = loader, after

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        try:
            self._after(module)
        except Exception as e:
            print("dlaunch: could not hook %s: %s: %s" % (module.__name__, type(e).__name__, e),
                  file=sys.stderr)

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, targets):
        self._targets = targets  # module name -> callback(module)

    def find_spec(self, name, path, target=None):
        after = self._targets.get(name)
        if after is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, after)
                return spec
        return None


def install(agent):
    hooks = _Hooks(agent)
    from . import _funcol_hooks

    funcol = _funcol_hooks.FuncolHooks(hooks, _tensor_info, lambda: call_site(3))
    targets = {
        "torch.distributed.distributed_c10d": hooks.patch_c10d,
        "torch.distributed._functional_collectives": funcol.patch,  # torch 2.x
        "torch.nn.parallel.distributed": hooks.patch_ddp,
        "torch.optim.optimizer": hooks.patch_optimizer,
    }
    # torch already imported (e.g. the agent started late): patch in place.
    for name, after in list(targets.items()):
        if name in sys.modules:
            after(sys.modules[name])
    sys.meta_path.insert(0, _Finder(targets))
    return hooks
