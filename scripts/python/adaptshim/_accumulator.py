"""AdaptDL's Accumulator (adaptdl.torch.Accumulator) over adaptdl.h's
accumulators: a dict of numbers whose updates each replica makes locally
(accumulation mode, reads as an empty dict) and that `synchronized()`
sums over the replicas into results every replica reads and writes alike
(synchronized mode).  Results of a synchronization outside any data loop
come back after a restart without communicating; the library keeps them
in the snapshot bound to each checkpoint.  Keys are str, values numbers
(anything float() takes: ints, floats, 0-d tensors); the library holds
them as doubles."""
import collections.abc
import contextlib
import ctypes

from . import _api


class _PendingUpdate:
    """What `accum[key]` is in accumulation mode: it records the `+ v` or
    `- v` of `accum[key] += v`, which the assignment then applies."""
    __slots__ = ("accumulator", "key", "amount")

    def __init__(self, accumulator, key):
        self.accumulator = accumulator
        self.key = key
        self.amount = 0.0

    def __add__(self, value):
        if isinstance(value, _PendingUpdate):
            raise TypeError("adaptshim: an accumulator update must be a number, not another "
                            "key's pending update")
        self.amount += float(value)
        return self

    def __sub__(self, value):
        if isinstance(value, _PendingUpdate):
            raise TypeError("adaptshim: an accumulator update must be a number, not another "
                            "key's pending update")
        self.amount -= float(value)
        return self


class Accumulator(collections.abc.MutableMapping):
    """Accumulator(initial_dict or key=value...): see the module's text.
    Create it outside data loop iterations, in the same order on every
    replica (it is named after the epoch and how many came before)."""

    def __init__(self, *args, **kwargs):
        initial = dict(*args, **kwargs)
        library = _api.api()
        self._handle = None
        self._depth = 0   # nested synchronized() blocks
        if initial:
            keys = (ctypes.c_char_p * len(initial))(
                *[_api.encode_key(key, "an accumulator key") for key in initial])
            values = (ctypes.c_double * len(initial))(*[float(v) for v in initial.values()])
            handle = library.adaptdl_accumulator_create_with_values(keys, values, len(initial))
        else:
            handle = library.adaptdl_accumulator_create()
        if not handle:
            raise _api.fail("the accumulator cannot be created")
        self._handle = handle
        self._library = library

    def __del__(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            try:
                self._library.adaptdl_accumulator_destroy(handle)
            except Exception:   # noqa: BLE001 - interpreter teardown
                pass

    @contextlib.contextmanager
    def synchronized(self):
        """Synchronized mode for the block: every replica's pending updates
        are summed into the results (a collective: every replica enters it
        at the same point), which the block reads and writes as a dict."""
        if self._depth > 0:
            self._depth += 1
            try:
                yield self
            finally:
                self._depth -= 1
            return
        library = _api.api()
        if library.adaptdl_accumulator_synchronize(self._handle) != 0:
            raise _api.fail("the accumulator cannot be synchronized")
        self._depth = 1
        try:
            yield self
        finally:
            self._depth = 0
            library.adaptdl_accumulator_desynchronize(self._handle)

    def _check(self, status, fallback):
        if status != 0:
            raise _api.fail(fallback)

    def _add(self, key, amount):
        encoded = _api.encode_key(key, "an accumulator key")
        if self._library.adaptdl_accumulator_add(self._handle, encoded, float(amount)) != 0:
            message = _api.last_error() or "cannot add to %r" % (key,)
            # a missing key in synchronized mode, as a dict's += would
            raise KeyError(message) if self._depth > 0 else _api.AdaptshimError(message)

    def update(self, *args, **kwargs):
        """Adds each value to its key (unlike dict.update)."""
        for key, value in dict(*args, **kwargs).items():
            self._add(key, value)

    def subtract(self, *args, **kwargs):
        """Subtracts each value from its key."""
        for key, value in dict(*args, **kwargs).items():
            self._add(key, -float(value))

    def __iadd__(self, other):
        self.update(other)
        return self

    def __isub__(self, other):
        self.subtract(other)
        return self

    def __getitem__(self, key):
        if self._depth == 0:
            return _PendingUpdate(self, key)
        value = ctypes.c_double()
        if not self._library.adaptdl_accumulator_get(
                self._handle, _api.encode_key(key, "an accumulator key"), ctypes.byref(value)):
            raise KeyError(key)
        return value.value

    def get(self, key, default=None):
        """The result for key, or default (always default outside
        synchronized(), where the accumulator reads as an empty dict)."""
        if self._depth == 0:
            return default
        try:
            return self[key]
        except KeyError:
            return default

    def __setitem__(self, key, value):
        if self._depth > 0:
            encoded = _api.encode_key(key, "an accumulator key")
            self._check(self._library.adaptdl_accumulator_set(self._handle, encoded,
                                                              float(value)),
                        "cannot set %r" % (key,))
            return
        if not isinstance(value, _PendingUpdate):
            raise TypeError("adaptshim: an accumulator outside synchronized() takes updates "
                            "only (accum[%r] += value or -= value), not an assignment of %s"
                            % (key, type(value).__name__))
        if value.accumulator is not self or value.key != key:
            raise ValueError("adaptshim: the update of %r is assigned to key %r"
                             % (value.key, key))
        self._add(key, value.amount)

    def __delitem__(self, key):
        if self._depth == 0:
            raise KeyError(key)   # an empty dict outside synchronized()
        encoded = _api.encode_key(key, "an accumulator key")
        if self._library.adaptdl_accumulator_remove(self._handle, encoded) != 0:
            raise KeyError(key)

    def clear(self):
        """Removes every result (synchronized mode); nothing outside it."""
        self._check(self._library.adaptdl_accumulator_clear(self._handle),
                    "cannot clear the accumulator")

    def _keys(self):
        count = self._library.adaptdl_accumulator_size(self._handle)
        return [self._library.adaptdl_accumulator_key(self._handle, i).decode("utf-8")
                for i in range(count)]

    def __iter__(self):
        return iter(self._keys())

    def __len__(self):
        return self._library.adaptdl_accumulator_size(self._handle)

    def __contains__(self, key):
        if not isinstance(key, str) or self._depth == 0:
            return False
        value = ctypes.c_double()
        return bool(self._library.adaptdl_accumulator_get(
            self._handle, _api.encode_key(key, "an accumulator key"), ctypes.byref(value)))

    def __repr__(self):
        return repr({key: self[key] for key in self._keys()}) if self._depth > 0 else "{}"
