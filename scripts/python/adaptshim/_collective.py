"""How a Python process joins its job's replicas for the cooperative API's
collectives (accumulator synchronization, adaptive loops, synchronize_states).

- Launched by mpirun under the preload: the process joins MPI's world
  (MPI_Init through the process's global scope, so that the preloaded
  library's MPI_Init runs and installs its transport), at the package's
  first call, unless the trainer did so already; MPI_Finalize at exit.
  Python has no MPI of its own, and the library only sees a world that
  MPI_Init made.
- Otherwise, once the trainer has initialized torch.distributed (a job
  started with MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK), the
  package gives the library an all-gather over it (adaptdl_use_allgather):
  sizes first, then the bytes padded to the longest, over the default
  process group.  torch is never imported here; a trainer that uses it has.

Nothing here is collective by itself: joining happens at any first call,
which one replica may make alone (adaptdl_num_replicas on rank 0).
"""
import atexit
import ctypes
import ctypes.util
import os
import sys

from . import _library

_mpi_checked = False
_mpi_joined = False
_torch_transport = None   # the installed _TorchAllGather, kept alive


def join(library):
    """Joins the replicas as described above; cheap once done."""
    global _mpi_checked
    if not _mpi_checked:
        _mpi_checked = True
        _join_mpi()
    if _torch_transport is None and not _mpi_joined:
        _join_torch(library)


def _launched_by_mpirun():
    return "OMPI_COMM_WORLD_SIZE" in os.environ or "PMIX_RANK" in os.environ


def _join_mpi():
    global _mpi_joined
    if not _launched_by_mpirun() or not _library.is_preloaded():
        return
    program = ctypes.CDLL(None)
    if not hasattr(program, "MPI_Initialized"):
        name = ctypes.util.find_library("mpi") or "libmpi.so.40"
        try:
            # global: Open MPI's components resolve libmpi's symbols
            ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
        except OSError as error:
            raise OSError("adaptshim: launched by mpirun, but Open MPI's library %s cannot be "
                          "loaded to join the job's MPI world: %s" % (name, error))
        program = ctypes.CDLL(None)
    initialized = ctypes.c_int(0)
    program.MPI_Initialized(ctypes.byref(initialized))
    if initialized.value:
        return   # the trainer's own MPI (the preload saw its MPI_Init)
    if program.MPI_Init(None, None) != 0:
        raise OSError("adaptshim: launched by mpirun, but MPI_Init failed: the replicas "
                      "cannot reach each other")
    _mpi_joined = True
    atexit.register(finalize)


def finalize():
    """Leaves the MPI world the package joined (done at exit; call it before
    os._exit).  Nothing when the package joined none."""
    global _mpi_joined
    if not _mpi_joined:
        return
    _mpi_joined = False
    program = ctypes.CDLL(None)
    finalized = ctypes.c_int(0)
    program.MPI_Finalized(ctypes.byref(finalized))
    if not finalized.value:
        program.MPI_Finalize()


def _join_torch(library):
    global _torch_transport
    distributed = sys.modules.get("torch.distributed")
    if distributed is None or not distributed.is_available() or \
            not distributed.is_initialized():
        return
    transport = _TorchAllGather(distributed)
    status = library.adaptdl_use_allgather(transport.replicas, transport.rank,
                                           transport.function, None)
    if status < 0:
        from . import _api
        raise _api.fail("adaptdl_use_allgather refused torch.distributed's world")
    _torch_transport = transport


class _TorchAllGather:
    """adaptdl_use_allgather's function over torch.distributed."""

    def __init__(self, distributed):
        from . import _api
        self.distributed = distributed
        self.replicas = distributed.get_world_size()
        self.rank = distributed.get_rank()
        self.gathered = None   # the last result, the library's to copy
        self.function = _api.ALLGATHER_FUNCTION(self._allgather)

    def _device(self, torch):
        if self.distributed.get_backend() == "nccl":
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")

    def _allgather(self, context, data, size, sizes, gathered, error, error_size):
        try:
            joined, part_sizes = self._exchange(ctypes.string_at(data, size) if size else b"")
        except Exception as exception:   # noqa: BLE001 - every failure is the call's
            reason = ("torch.distributed all_gather failed: %s: %s" % (
                type(exception).__name__, exception)).replace("\n", " ")
            encoded = reason.encode("utf-8", "replace")[:max(error_size - 1, 0)]
            if error_size > 0:
                ctypes.memmove(error, encoded + b"\0", len(encoded) + 1)
            return -1
        self.gathered = ctypes.create_string_buffer(joined, max(len(joined), 1))
        for replica, part_size in enumerate(part_sizes):
            sizes[replica] = part_size
        gathered[0] = ctypes.cast(self.gathered, ctypes.c_void_p)
        return 0

    def _exchange(self, own):
        """Every replica's bytes joined in rank order, and their sizes."""
        import torch
        device = self._device(torch)
        size = torch.tensor([len(own)], dtype=torch.int64, device=device)
        sizes = [torch.zeros(1, dtype=torch.int64, device=device) for _ in range(self.replicas)]
        self.distributed.all_gather(sizes, size)
        part_sizes = [int(s.item()) for s in sizes]
        longest = max(max(part_sizes), 1)
        padded = torch.zeros(longest, dtype=torch.uint8, device=device)
        if own:
            padded[:len(own)] = torch.frombuffer(bytearray(own), dtype=torch.uint8).to(device)
        parts = [torch.empty(longest, dtype=torch.uint8, device=device)
                 for _ in range(self.replicas)]
        self.distributed.all_gather(parts, padded)
        joined = b"".join(part[:n].cpu().numpy().tobytes()
                          for part, n in zip(parts, part_sizes))
        return joined, part_sizes
