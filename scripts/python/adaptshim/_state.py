"""AdaptDL's registered state (adaptdl.checkpoint.State) over adaptdl.h's
save/load callbacks: the library saves a State's bytes in the snapshot
bound to each checkpoint the trainer commits and hands them back when the
trainer loads that checkpoint (or at registration, when it was loaded
before).  register_state(name, model, optimizer, ...) is the common case:
the objects' state_dict()s through torch.save and torch.load bytes."""
import ctypes
import io
import sys

from . import _api

_registered = {}   # name -> State: the callbacks stay alive with them


class State:
    """Subclass and define save(fileobj) and load(fileobj); the name must be
    unique in the process and the same on every replica and run."""

    def __init__(self, name):
        self.name = name
        self._saved = None   # the bytes of the last save, the library's to copy
        self._save_function = _api.SAVE_FUNCTION(self._save_callback)
        self._load_function = _api.LOAD_FUNCTION(self._load_callback)
        encoded = _api.encode_key(name, "a state name")
        if _api.api().adaptdl_register_callbacks(encoded, self._save_function,
                                                 self._load_function, None) != 0:
            raise _api.fail("state %r cannot be registered" % (name,))
        _registered[name] = self

    def save(self, fileobj):
        raise NotImplementedError("adaptshim: State %r has no save(fileobj)" % self.name)

    def load(self, fileobj):
        raise NotImplementedError("adaptshim: State %r has no load(fileobj)" % self.name)

    def _report(self, what, exception):
        print(("adaptshim: %s state %r failed: %s: %s" % (
            what, self.name, type(exception).__name__, exception)).replace("\n", " "),
            file=sys.stderr, flush=True)

    def _save_callback(self, context, bytes_out, size_out):
        try:
            buffer = io.BytesIO()
            self.save(buffer)
            data = buffer.getvalue()
        except Exception as exception:   # noqa: BLE001 - the commit fails, said once
            self._report("saving", exception)
            return -1
        self._saved = ctypes.create_string_buffer(data, max(len(data), 1))
        bytes_out[0] = ctypes.cast(self._saved, ctypes.c_void_p)
        size_out[0] = len(data)
        return 0

    def _load_callback(self, context, data, size):
        try:
            self.load(io.BytesIO(ctypes.string_at(data, size) if size else b""))
        except Exception as exception:   # noqa: BLE001 - the restore refuses them
            self._report("loading", exception)
            return -1
        return 0


class _StateDicts(State):
    """The state_dict()s of objects such as a model and its optimizer."""

    def __init__(self, name, objects):
        for item in objects:
            if not (hasattr(item, "state_dict") and hasattr(item, "load_state_dict")):
                raise TypeError("adaptshim: register_state(%r, ...) takes objects with "
                                "state_dict() and load_state_dict() (a torch module, "
                                "optimizer or scheduler), not %s" % (name, type(item).__name__))
        self.objects = list(objects)
        super().__init__(name)

    def save(self, fileobj):
        import torch
        torch.save([item.state_dict() for item in self.objects], fileobj)

    def load(self, fileobj):
        import torch
        dicts = torch.load(fileobj, map_location="cpu")
        if len(dicts) != len(self.objects):
            raise ValueError("the checkpoint holds %d state dicts, %d objects are registered"
                             % (len(dicts), len(self.objects)))
        for item, state in zip(self.objects, dicts):
            item.load_state_dict(state)


def register_state(name, *objects):
    """Registers objects with state_dict()/load_state_dict() (a model, its
    optimizer, ...) under `name`; returns the State."""
    if not objects:
        raise TypeError("adaptshim: register_state(%r) needs at least one object with "
                        "state_dict() and load_state_dict()" % (name,))
    return _StateDicts(name, objects)


def synchronize_states():
    """Sums every accumulator's pending updates over the replicas (a
    collective): call it on every replica before the checkpoint commit that
    should carry them (AdaptDL's save_all_states)."""
    if _api.api().adaptdl_synchronize_states() != 0:
        raise _api.fail("the states cannot be synchronized")
