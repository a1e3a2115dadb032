"""The C cooperative API (adaptdl.h) as ctypes prototypes, and its errors.

Every other module of the package calls the library through `api()`, which
declares the prototypes once, joins the job's replicas (the MPI world of
an mpirun job, else torch.distributed once the trainer initialized it, see
_collective.py) and hands back the library.  A refusal of the library
becomes an `AdaptshimError` whose message is adaptdl_last_error(): the
one line that says what was wrong and what is accepted.
"""
import ctypes

from . import _library

NONE = -1    # ADAPTDL_NONE: no epoch, outside every epoch loop
ERROR = -2   # ADAPTDL_ERROR

# int save(void *context, void **bytes, size_t *size)
SAVE_FUNCTION = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p,
                                 ctypes.POINTER(ctypes.c_void_p),
                                 ctypes.POINTER(ctypes.c_size_t))
# int load(void *context, const void *bytes, size_t size)
LOAD_FUNCTION = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_size_t)
# int allgather(void *context, const void *bytes, size_t size, size_t *sizes,
#               const void **gathered, char *error, size_t error_size)
ALLGATHER_FUNCTION = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                                      ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t),
                                      ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                                      ctypes.c_size_t)


class AdaptshimError(RuntimeError):
    """A call the C library refused; the message is its one-line reason."""


_u64, _size, _ptr, _str = ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_char_p
_PROTOTYPES = {
    # name: (result, arguments)
    "adaptdl_last_error": (_str, ()),
    "adaptdl_num_replicas": (ctypes.c_uint, ()),
    "adaptdl_replica_rank": (ctypes.c_uint, ()),
    "adaptdl_num_restarts": (ctypes.c_uint, ()),
    "adaptdl_use_allgather": (ctypes.c_int, (ctypes.c_uint, ctypes.c_uint, ALLGATHER_FUNCTION,
                                             _ptr)),
    "adaptdl_remaining_epochs_until": (ctypes.c_int64, (ctypes.c_int64,)),
    "adaptdl_next_epoch": (ctypes.c_int64, ()),
    "adaptdl_leave_epoch_loop": (ctypes.c_int, ()),
    "adaptdl_current_epoch": (ctypes.c_int64, ()),
    "adaptdl_finished_epochs": (ctypes.c_int64, ()),
    "adaptdl_loop_create": (_ptr, (_u64, _u64, ctypes.c_bool)),
    "adaptdl_loop_destroy": (None, (_ptr,)),
    "adaptdl_loop_train": (ctypes.c_int, (_ptr,)),
    "adaptdl_loop_autoscale": (ctypes.c_int, (_ptr, _u64, _u64, _u64)),
    "adaptdl_loop_begin": (ctypes.c_int, (_ptr,)),
    "adaptdl_loop_next": (ctypes.c_long, (_ptr, ctypes.POINTER(_u64), _size)),
    "adaptdl_loop_break": (None, (_ptr,)),
    "adaptdl_loop_current_index": (_u64, (_ptr,)),
    "adaptdl_loop_local_batch_size": (_u64, (_ptr,)),
    "adaptdl_loop_global_batch_size": (_u64, (_ptr,)),
    "adaptdl_loop_gain": (ctypes.c_double, (_ptr,)),
    "adaptdl_accumulator_create": (_ptr, ()),
    "adaptdl_accumulator_create_with_values": (_ptr, (ctypes.POINTER(_str),
                                                      ctypes.POINTER(ctypes.c_double), _size)),
    "adaptdl_accumulator_destroy": (None, (_ptr,)),
    "adaptdl_accumulator_add": (ctypes.c_int, (_ptr, _str, ctypes.c_double)),
    "adaptdl_accumulator_synchronize": (ctypes.c_int, (_ptr,)),
    "adaptdl_accumulator_desynchronize": (None, (_ptr,)),
    "adaptdl_accumulator_get": (ctypes.c_bool, (_ptr, _str, ctypes.POINTER(ctypes.c_double))),
    "adaptdl_accumulator_set": (ctypes.c_int, (_ptr, _str, ctypes.c_double)),
    "adaptdl_accumulator_remove": (ctypes.c_int, (_ptr, _str)),
    "adaptdl_accumulator_clear": (ctypes.c_int, (_ptr,)),
    "adaptdl_accumulator_size": (_size, (_ptr,)),
    "adaptdl_accumulator_key": (_str, (_ptr, _size)),
    "adaptdl_register_callbacks": (ctypes.c_int, (_str, SAVE_FUNCTION, LOAD_FUNCTION, _ptr)),
    "adaptdl_synchronize_states": (ctypes.c_int, ()),
}

_declared = None


def declared():
    """The library with the prototypes declared, without joining anything
    (the collective module uses it while it joins)."""
    global _declared
    if _declared is None:
        library = _library.library()
        for name, (result, arguments) in _PROTOTYPES.items():
            try:
                function = getattr(library, name)
            except AttributeError:
                raise OSError("adaptshim: the C library has no %s: it is older than this "
                              "Python package; install both from the same build" % name)
            function.restype = result
            function.argtypes = arguments
        _declared = library
    return _declared


def api():
    """The library, with this process joined to its job's replicas."""
    library = declared()
    from . import _collective
    _collective.join(library)
    return library


def last_error():
    """adaptdl_last_error() as text."""
    return (declared().adaptdl_last_error() or b"").decode("utf-8", "replace")


def fail(fallback):
    """An AdaptshimError carrying the library's reason (or `fallback` when
    it gave none)."""
    return AdaptshimError(last_error() or fallback)


def encode_key(key, what):
    """A key or name as the C string the library takes; TypeError for
    anything but a str without NUL characters."""
    if not isinstance(key, str):
        raise TypeError("adaptshim: %s must be a str, not %s" % (what, type(key).__name__))
    encoded = key.encode("utf-8")
    if b"\0" in encoded:
        raise ValueError("adaptshim: %s %r holds a NUL character" % (what, key))
    return encoded
