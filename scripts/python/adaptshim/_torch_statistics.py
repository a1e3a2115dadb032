"""Transparent gradient statistics for unmodified PyTorch trainers
(adaptshim(7), the PyTorch statistics).

Installed by the project's sitecustomize once the trainer imported torch,
in a process into which libadaptshim.so is preloaded.  It is glue only:
norms, the noise estimate, steps, stops and batch-size decisions are the C
library's (adaptdl_steps.h); this module tells it what only Python sees.

- Steps are optimizer steps: every optimizer class's `step` is wrapped, and
  after the outermost one returns, the library's step boundary runs.  When
  every replica agreed to stop there (a stop signal, or a restart for a new
  batch size), the library has written its job record and this module
  raises SystemExit(143), so the interpreter's buffers, finally blocks and
  atexit handlers run as on any exit.
- Several replicas (DistributedDataParallel over a process group of more
  than one): a communication hook on every DDP model measures |g_local|^2
  of each bucket before its all-reduce and |g_mean|^2 after it.  It reduces
  exactly as DDP does without a hook (the bucket multiplied by 1/K, then
  summed), so the averaged gradients are bit-identical.  The piggy-backed
  reduction of the MPI steps (exit and restart requests, norms, records, times)
  travels as an asynchronous all_reduce on a gloo group of its own, posted
  at one boundary and completed at the next.  A model whose trainer
  registers its own hook keeps it; the library's log then says in one line
  that it has no statistics for it.
- One process: at each optimizer step the gradient of every parameter is
  handed to the library (as it is, or flattened per dtype when the model
  has more parameters than the library keeps pieces), whose single-replica
  difference estimator pairs it with the previous step's.
- A trainer whose checkpoint restores the optimizer's learning rate over
  the one ADAPTDL_LR_ARG injected is told so in one line.
- The local batch of a step is the first dimension of the model's input:
  a DDP model's, or, with one process, the first module called with
  gradients enabled after a boundary (found by a global forward pre-hook
  for the first steps, then by a hook on that module only).
"""
import ctypes
import numbers
import os
import sys
import threading
import time

from . import _library

_POST = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_double),
                         ctypes.POINTER(ctypes.c_double), ctypes.c_int)
_COMPLETE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)

_state = None
# How long the process lets go of the GIL before its process groups go away
# (see _Statistics.finish).
_GIL_RELEASE_SECONDS = 0.02
# The gradient pieces of one step the library pairs with the previous
# step's (PREVIOUS_GRADIENTS_PIECES in runtime/previous_gradients.h).
_LIBRARY_PIECES = 64


def _declare(lib):
    """Argument and result types of the functions this module calls."""
    lib.adaptdl_steps_active.restype = ctypes.c_int
    lib.adaptdl_steps_active.argtypes = []
    lib.adaptdl_steps_install_transport.restype = ctypes.c_int
    lib.adaptdl_steps_install_transport.argtypes = [ctypes.c_uint, _POST, _COMPLETE,
                                                    ctypes.c_void_p]
    lib.adaptdl_steps_measuring.restype = ctypes.c_int
    lib.adaptdl_steps_measuring.argtypes = []
    lib.adaptdl_steps_squared_norm.restype = ctypes.c_int
    lib.adaptdl_steps_squared_norm.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint,
                                               ctypes.POINTER(ctypes.c_double)]
    lib.adaptdl_steps_report_gradient.restype = ctypes.c_int
    lib.adaptdl_steps_report_gradient.argtypes = [ctypes.c_double] * 4
    lib.adaptdl_steps_report_unmeasured.restype = ctypes.c_int
    lib.adaptdl_steps_report_unmeasured.argtypes = [ctypes.c_double]
    lib.adaptdl_steps_report_single_replica_piece.restype = ctypes.c_int
    lib.adaptdl_steps_report_single_replica_piece.argtypes = [ctypes.c_void_p, ctypes.c_uint64,
                                                              ctypes.c_uint]
    lib.adaptdl_steps_boundary.restype = ctypes.c_int
    lib.adaptdl_steps_boundary.argtypes = [ctypes.c_uint64]
    lib.adaptdl_steps_finish.restype = ctypes.c_int
    lib.adaptdl_steps_finish.argtypes = []
    lib.adaptdl_steps_notice.restype = None
    lib.adaptdl_steps_notice.argtypes = [ctypes.c_char_p]


def _leading_dimension(value):
    """The first dimension of the first tensor in a model's input."""
    import torch
    if isinstance(value, torch.Tensor):
        return int(value.shape[0]) if value.dim() > 0 else None
    if isinstance(value, (list, tuple)):
        for item in value:
            found = _leading_dimension(item)
            if found is not None:
                return found
    elif isinstance(value, dict):
        for item in value.values():
            found = _leading_dimension(item)
            if found is not None:
                return found
    return None


class _CallbackToken:
    """Held by one bucket callback only: its end tells that the gloo thread
    that ran the callback has let go of it (see wait_for_callbacks)."""

    __slots__ = ("statistics",)

    def __init__(self, statistics):
        self.statistics = statistics
        with statistics.callbacks_lock:
            if statistics.callbacks_alive == 0:
                statistics.callbacks_released.clear()
            statistics.callbacks_alive += 1

    def __del__(self):
        statistics = self.statistics
        with statistics.callbacks_lock:
            statistics.callbacks_alive -= 1
            if statistics.callbacks_alive == 0:
                statistics.callbacks_released.set()


class _GlooTransport:
    """The piggy-backed reduction over torch.distributed: a gloo group made
    for it alone (so it never queues behind the trainer's collectives), an
    asynchronous all_reduce of doubles posted at one boundary and waited
    for at the next."""

    def __init__(self, statistics, torch, dist):
        self.statistics = statistics
        self.torch = torch
        self.group = dist.new_group(backend="gloo")
        self.dist = dist
        self.tensor = None
        self.work = None
        self.receive = None
        self.count = 0
        self.closed = False
        # kept referenced: the library calls them until the process ends
        self.post_function = _POST(self.post)
        self.complete_function = _COMPLETE(self.complete)

    def post(self, context, send, receive, count):
        if self.closed:
            return -1
        try:
            tensor = self.torch.empty(count, dtype=self.torch.float64)
            ctypes.memmove(tensor.data_ptr(), send, count * 8)
            self.work = self.dist.all_reduce(tensor, group=self.group, async_op=True)
            self.tensor, self.receive, self.count = tensor, receive, count
            return 0
        except Exception as error:
            self.statistics.notice_once("the step reduction could not be posted (%s): this "
                                        "step's numbers are lost" % error)
            return -1

    def complete(self, context):
        try:
            self.work.wait()
            ctypes.memmove(self.receive, self.tensor.data_ptr(), self.count * 8)
            return 0
        except Exception as error:
            self.statistics.notice_once("the step reduction failed (%s): this step counts "
                                        "as nobody's" % error)
            ctypes.memset(self.receive, 0, self.count * 8)
            return -1


class _Statistics:
    def __init__(self, lib, torch):
        self.lib = lib
        self.torch = torch
        self.dist = None
        try:
            import torch.distributed as dist
            if dist.is_available():
                self.dist = dist
        except ImportError:
            pass
        self.transport = None
        self.installed = False
        self.disabled = False
        self.step_depth = 0
        self.batch = None             # this step's local batch, from a forward pre-hook
        self.sync_until = 0.0         # the latest bucket reduction finished this step
        self.callbacks_alive = 0      # bucket callbacks gloo's threads still hold
        # reentrant: a token freed by the collector on the thread that is
        # making another one must not wait for itself
        self.callbacks_lock = threading.RLock()
        self.callbacks_released = threading.Event()   # set while callbacks_alive == 0
        self.callbacks_released.set()
        self.step_measuring = None    # this step measures norms (asked at its first bucket)
        self.hooked_models = 0        # DDP models with the statistics hook
        self.own_hook_models = 0      # DDP models with the trainer's own hook
        self.notices = set()
        # one process: the flat gradient buffers (one per dtype) and the
        # module whose input gives the batch
        self.flat = {}
        self.global_pre_hook = None
        self.first_module = None
        self.first_module_streak = 0
        self.module_hook = None
        self.ddp_in_use = False

    # --- the library ---------------------------------------------------------------

    def notice(self, message):
        self.lib.adaptdl_steps_notice(("adaptshim: " + message).encode("utf-8", "replace"))

    def notice_once(self, message):
        if message not in self.notices:
            self.notices.add(message)
            self.notice(message)

    def squared_norm(self, tensor):
        squared = ctypes.c_double()
        if self.lib.adaptdl_steps_squared_norm(tensor.data_ptr(), tensor.numel(),
                                               tensor.element_size(),
                                               ctypes.byref(squared)) != 0:
            return None
        return squared.value

    def world(self):
        """The replica count of torch.distributed's world (1 without it)."""
        dist = self.dist
        if dist is None or not dist.is_initialized():
            return 1
        return dist.get_world_size()

    def ensure_transport(self):
        """Installs the step reduction once: over gloo for several replicas,
        a loopback for one.  False when the library refused it."""
        if self.installed or self.disabled:
            return self.installed
        replicas = self.world()
        if replicas > 1:
            self.transport = _GlooTransport(self, self.torch, self.dist)
            status = self.lib.adaptdl_steps_install_transport(
                replicas, self.transport.post_function, self.transport.complete_function,
                None)
        else:
            status = self.lib.adaptdl_steps_install_transport(1, _POST(), _COMPLETE(), None)
        if status != 0:
            self.disabled = True   # the library said why, in its log
            return False
        self.installed = True
        if self.transport is not None:
            import atexit
            atexit.register(self.finish, True)
        return True

    def finish(self, closing=False):
        """Completes the step reduction in flight (every replica posted it;
        one that left without completing it could leave the others
        waiting); `closing`: the group goes away, nothing is posted after."""
        if not self.installed:
            return
        self.lib.adaptdl_steps_finish()
        if closing and self.transport is not None:
            self.transport.closed = True
            self.wait_for_callbacks()
            # A gloo thread finishing a work whose future had Python
            # callbacks (ours, or a trainer's own hook's) still needs the
            # GIL for a moment after the future completed.  The groups
            # about to go away join those threads while holding the GIL:
            # both would wait forever (seen 1 run in 5 with a trainer's own
            # allreduce_hook, torch 1.13).  Letting go of the GIL briefly
            # here lets any such thread finish first; it costs once per job.
            time.sleep(_GIL_RELEASE_SECONDS)

    # --- DistributedDataParallel -----------------------------------------------------

    def bucket_hook(self, model_size):
        """The communication hook of a DDP model whose process group has
        `model_size` processes."""
        torch, dist, lib = self.torch, self.dist, self.lib
        scale = 1.0 / model_size
        measurable = (torch.float32, torch.float64)

        def adaptshim_statistics_hook(process_group, bucket):
            buffer = bucket.buffer()
            token = _CallbackToken(self)
            if self.step_measuring is None:   # once per step: the library's choice
                self.step_measuring = lib.adaptdl_steps_measuring() == 1
            measuring = (self.step_measuring and buffer.dtype in measurable
                         and buffer.device.type == "cpu" and buffer.is_contiguous())
            started = time.perf_counter()
            local_sqr = self.squared_norm(buffer) if measuring else 0.0
            # as DDP's reducer divides without a hook: the same bits
            buffer.mul_(scale)
            posted = time.perf_counter()
            future = dist.all_reduce(buffer, group=process_group, async_op=True).get_future()

            def reduced(future, token=token):
                result = future.value()[0]
                try:
                    finished = time.perf_counter()
                    # the time some bucket of the step was being reduced:
                    # buckets in flight together count once
                    sync_seconds = max(0.0, finished - max(posted, self.sync_until))
                    self.sync_until = max(self.sync_until, finished)
                    mean_sqr = self.squared_norm(result) if measuring else 0.0
                    norm_seconds = (posted - started) + (time.perf_counter() - finished)
                    if local_sqr is None or mean_sqr is None:
                        lib.adaptdl_steps_report_unmeasured(sync_seconds)
                    else:
                        lib.adaptdl_steps_report_gradient(local_sqr, mean_sqr, sync_seconds,
                                                          norm_seconds)
                except Exception as error:   # never the trainer's backward
                    self.notice_once("a gradient bucket was not measured: %s" % error)
                return result

            return future.then(reduced)

        return adaptshim_statistics_hook

    def wait_for_callbacks(self, seconds=2.0):
        """Waits (without the GIL) until gloo's threads have let go of every
        bucket callback of the step.  A thread drops its callback only after
        completing the future DDP waits for, and needs the GIL to do so: if
        the trainer then tore its process group down (the group's destructor
        waits for those threads, holding the GIL), both would wait forever.
        The last callback to go sets an event, so the wait ends as soon as
        it does (a polling sleep cost a step a quarter of a millisecond)."""
        if self.callbacks_alive > 0:
            self.callbacks_released.wait(seconds)

    def watch_ddp(self, model, register_comm_hook):
        """Called at the end of DistributedDataParallel.__init__."""
        group = getattr(model, "process_group", None)
        size = group.size() if group is not None else self.world()
        if size <= 1:
            return  # one process: measured at the optimizer step
        self.ddp_in_use = True
        if self.global_pre_hook is not None:   # the DDP model's input gives the batch
            self.global_pre_hook.remove()
            self.global_pre_hook = None
        model._adaptshim_own_hook = None
        model._adaptshim_hooked = False

        def first_forward(module, inputs):
            if not module._adaptshim_hooked and module._adaptshim_own_hook is None:
                module._adaptshim_hooked = True
                if self.ensure_transport():
                    if size != self.world():
                        self.notice_once("a DistributedDataParallel model over %d of the %d "
                                         "processes: no gradient statistics for it" %
                                         (size, self.world()))
                    else:
                        register_comm_hook(module, group, self.bucket_hook(size))
                        self.hooked_models += 1
            if self.batch is None and self.torch.is_grad_enabled():
                self.batch = _leading_dimension(inputs)

        model.register_forward_pre_hook(first_forward)

    def own_hook(self, model, name):
        """The trainer registers a communication hook of its own on `model`."""
        if getattr(model, "_adaptshim_hooked", False) or not hasattr(model,
                                                                     "_adaptshim_own_hook"):
            return
        model._adaptshim_own_hook = name
        self.own_hook_models += 1
        self.ensure_transport()
        self.notice("the trainer's own DistributedDataParallel communication hook %s is "
                    "kept: no gradient statistics for that model (steps and stops still "
                    "agree across replicas)" % name)

    # --- one process: the input's batch ---------------------------------------------

    def global_forward_pre_hook(self, module, inputs):
        if self.batch is None and self.torch.is_grad_enabled():
            batch = _leading_dimension(inputs)
            if batch is not None:
                self.batch = batch
                if module is self.first_module:
                    self.first_module_streak += 1
                else:
                    self.first_module, self.first_module_streak = module, 1

    def module_forward_pre_hook(self, module, inputs):
        if self.batch is None and self.torch.is_grad_enabled():
            self.batch = _leading_dimension(inputs)

    def settle_batch_hook(self):
        """After three steps that began with the same module, that module's
        own pre-hook replaces the global one, which slows every module."""
        if self.global_pre_hook is not None and self.first_module_streak >= 3:
            self.global_pre_hook.remove()
            self.global_pre_hook = None
            self.module_hook = self.first_module.register_forward_pre_hook(
                self.module_forward_pre_hook)

    # --- optimizer steps ----------------------------------------------------------------

    def measure_single_replica(self, optimizer):
        """One process: every parameter's gradient, in the same order every
        step (the library pairs each piece with the previous step's piece
        at the same place).  Up to the library's 64 pieces they are handed
        over as they are; a model with more parameters is flattened, per
        dtype, into buffers kept across steps (one copy of the gradient)."""
        torch = self.torch
        gradients = []
        for group in optimizer.param_groups:
            for parameter in group["params"]:
                gradient = parameter.grad
                if gradient is None or gradient.is_sparse or gradient.dtype not in (
                        torch.float32, torch.float64):
                    continue
                if gradient.device.type != "cpu" or not gradient.is_contiguous():
                    gradient = gradient.detach().contiguous().cpu()
                gradients.append(gradient)
        report = self.lib.adaptdl_steps_report_single_replica_piece
        if len(gradients) <= _LIBRARY_PIECES:
            for gradient in gradients:
                report(gradient.data_ptr(), gradient.numel(), gradient.element_size())
            return
        for dtype in (torch.float32, torch.float64):
            pieces = [gradient.reshape(-1) for gradient in gradients if gradient.dtype == dtype]
            if not pieces:
                continue
            count = sum(piece.numel() for piece in pieces)
            flat = self.flat.get(dtype)
            if flat is None or flat.numel() != count:
                flat = torch.empty(count, dtype=dtype)
                self.flat[dtype] = flat
            torch.cat(pieces, out=flat)
            report(flat.data_ptr(), count, flat.element_size())

    def before_step(self, optimizer):
        if not self.ensure_transport():
            return
        if self.world() == 1 and not self.ddp_in_use:
            self.measure_single_replica(optimizer)
        elif self.hooked_models == 0:
            # no hook of ours measured this step (the trainer's own hook, or
            # gradients reduced some other way): it counts, unmeasured
            self.lib.adaptdl_steps_report_unmeasured(0.0)

    def after_step(self):
        if not self.installed:
            return
        self.wait_for_callbacks()
        batch, self.batch = self.batch, None
        self.sync_until = 0.0
        self.step_measuring = None
        if self.world() == 1 and not self.ddp_in_use:
            self.settle_batch_hook()
        if self.lib.adaptdl_steps_boundary(batch or 0) == 1:
            raise SystemExit(143)

    def wrap_step(self, step):
        statistics = self

        def adaptshim_step(optimizer, *args, **kwargs):
            # only the outermost step of optimizers that call others' steps
            if statistics.step_depth or statistics.disabled:
                return step(optimizer, *args, **kwargs)
            statistics.step_depth += 1
            try:
                statistics.before_step(optimizer)
                result = step(optimizer, *args, **kwargs)
            finally:
                statistics.step_depth -= 1
            statistics.after_step()
            return result

        for name in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(adaptshim_step, name, getattr(step, name, None))
        adaptshim_step.__dict__.update(getattr(step, "__dict__", {}))
        adaptshim_step.__wrapped__ = step
        adaptshim_step._adaptshim_step = True
        return adaptshim_step


def _patch_optimizers(statistics, torch):
    """Wraps `step` of every optimizer class when an instance is made (the
    way torch's own profiling hook does, in Optimizer._hook_for_profile)."""
    Optimizer = torch.optim.Optimizer

    def wrap_class_step(optimizer):
        cls = type(optimizer)
        if not getattr(cls.step, "_adaptshim_step", False):
            cls.step = statistics.wrap_step(cls.step)

    if hasattr(Optimizer, "_hook_for_profile"):
        hook_for_profile = Optimizer._hook_for_profile

        def _hook_for_profile(self):
            hook_for_profile(self)
            wrap_class_step(self)

        Optimizer._hook_for_profile = _hook_for_profile
    else:
        initialize = Optimizer.__init__

        def __init__(self, *args, **kwargs):
            initialize(self, *args, **kwargs)
            wrap_class_step(self)

        Optimizer.__init__ = __init__


def _learning_rates(optimizer):
    """Each param group's learning rate when it is a plain number, else None."""
    rates = []
    for group in optimizer.param_groups:
        rate = group.get("lr")
        plain = isinstance(rate, numbers.Real) and not isinstance(rate, bool)
        rates.append(float(rate) if plain else None)
    return rates


def _patch_optimizer_state_loading(statistics, torch):
    """When the shim injects the learning rate (ADAPTDL_LR_ARG), says in one
    line that a trainer's checkpoint put another one back: a restart for a
    new batch size then trains at the old batch's rate, and the adaptation
    quietly loses what it was for (optimizer.load_state_dict restores each
    param group's lr with the rest of the optimizer's state)."""
    if not os.environ.get("ADAPTDL_LR_ARG"):
        return
    Optimizer = torch.optim.Optimizer
    load_state_dict = Optimizer.load_state_dict

    def adaptshim_load_state_dict(self, state_dict):
        built = _learning_rates(self)
        result = load_state_dict(self, state_dict)
        for before, after in zip(built, _learning_rates(self)):
            if before is not None and after is not None and before != after:
                statistics.notice_once(
                    "the trainer's optimizer.load_state_dict put back learning rate %g over "
                    "the %g it was built with from the command line, which ADAPTDL_LR_ARG "
                    "sets for this run's batch size: this run trains at %g; set each param "
                    "group's lr again after loading to keep the injected rate"
                    % (after, before, after))
                break
        return result

    adaptshim_load_state_dict.__doc__ = load_state_dict.__doc__
    adaptshim_load_state_dict.__wrapped__ = load_state_dict
    Optimizer.load_state_dict = adaptshim_load_state_dict


def _patch_ddp(statistics, torch):
    """Watches every DistributedDataParallel model and the trainer's own
    communication hooks."""
    if statistics.dist is None:
        return
    from torch.nn.parallel import DistributedDataParallel as DDP
    initialize = DDP.__init__
    register_comm_hook = DDP.register_comm_hook

    def __init__(self, *args, **kwargs):
        initialize(self, *args, **kwargs)
        statistics.watch_ddp(self, register_comm_hook)

    def trainer_register_comm_hook(self, state, hook):
        statistics.own_hook(self, getattr(hook, "__qualname__", repr(hook)))
        return register_comm_hook(self, state, hook)

    DDP.__init__ = __init__
    DDP.register_comm_hook = trainer_register_comm_hook
    destroy_process_group = statistics.dist.destroy_process_group

    def adaptshim_destroy_process_group(group=None):
        # the step reduction's group goes too when every group does
        statistics.finish(closing=group is None)
        return destroy_process_group(group)

    adaptshim_destroy_process_group.__doc__ = destroy_process_group.__doc__
    statistics.dist.destroy_process_group = adaptshim_destroy_process_group
    if hasattr(DDP, "_register_builtin_comm_hook"):
        register_builtin = DDP._register_builtin_comm_hook

        def trainer_register_builtin_comm_hook(self, comm_hook_type):
            statistics.own_hook(self, str(comm_hook_type))
            return register_builtin(self, comm_hook_type)

        DDP._register_builtin_comm_hook = trainer_register_builtin_comm_hook


def install(torch):
    """Installs the statistics into the just-imported torch module, when the
    preloaded library is active in this process; otherwise does nothing."""
    global _state
    if _state is not None:
        return
    lib = _library._preloaded()
    if lib is None or not hasattr(lib, "adaptdl_steps_active"):
        return
    _declare(lib)
    if lib.adaptdl_steps_active() != 1:
        return
    statistics = _Statistics(lib, torch)
    _patch_optimizers(statistics, torch)
    _patch_optimizer_state_loading(statistics, torch)
    _patch_ddp(statistics, torch)
    from torch.nn.modules.module import register_module_forward_pre_hook
    statistics.global_pre_hook = register_module_forward_pre_hook(
        statistics.global_forward_pre_hook)
    _state = statistics
