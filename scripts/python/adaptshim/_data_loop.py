"""AdaptDL's data loader helper (AdaptiveDataLoaderHelper with
ElasticSampler's partition) over adaptdl.h's data loops.

DataLoop(records, batch_size) hands out, per batch, the indices of the
records this replica trains: the shuffled (or not) order of the epoch,
padded to a whole number of global batches and dealt out to the replicas
as ElasticSampler does, continued after a restart at the index where the
interrupted iteration stood and re-partitioned over the new replica
count; an iteration at a position of the epoch finished before the
restart is empty (AdaptDL's skipdone).  AdaptiveDataLoader(dataset,
batch_size) does the same over a map-style dataset (a torch Dataset or any
sequence) and yields collated batches.  `batch_size` is the global batch;
each replica gets its share of it, or with autoscale_batch_size() the
share rank 0's goodput decision chooses.
"""
import ctypes

from . import _api


class DataLoop:
    """Index batches over `records` records; see the module's text."""

    def __init__(self, records, batch_size, shuffle=False):
        for name, value, least in (("records", records, 1), ("batch_size", batch_size, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError("adaptshim: a data loop's %s must be an int of at least %d, "
                                 "not %r" % (name, least, value))
        library = _api.api()
        self._handle = None
        handle = library.adaptdl_loop_create(records, batch_size, bool(shuffle))
        if not handle:
            raise _api.fail("the data loop cannot be created")
        self._handle = handle
        self._library = library
        self._records = records
        self._batch_size = batch_size
        self._capacity = batch_size
        self._indices = (ctypes.c_uint64 * self._capacity)()

    def __del__(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            try:
                self._library.adaptdl_loop_destroy(handle)
            except Exception:   # noqa: BLE001 - interpreter teardown
                pass

    def train(self):
        """This loop trains: its steps are profiled for the goodput model."""
        if self._library.adaptdl_loop_train(self._handle) != 0:
            raise _api.fail("the loop cannot train")

    def autoscale_batch_size(self, max_batch_size, local_bsz_bounds=None):
        """Lets the goodput model choose the global batch, up to
        max_batch_size, each replica's share within local_bsz_bounds
        (min, max; None: no bound); the loop trains."""
        low, high = local_bsz_bounds if local_bsz_bounds is not None else (None, None)
        if isinstance(max_batch_size, bool) or not isinstance(max_batch_size, int) or \
                max_batch_size < self._batch_size:
            raise ValueError("adaptshim: max_batch_size must be an int of at least the batch "
                             "size %d, not %r" % (self._batch_size, max_batch_size))
        if self._library.adaptdl_loop_autoscale(self._handle, max_batch_size, low or 0,
                                                high or 0) != 0:
            raise _api.fail("the loop cannot autoscale its batch size")
        self._capacity = max(self._capacity, max_batch_size, high or 0)
        self._indices = (ctypes.c_uint64 * self._capacity)()

    @property
    def current_index(self):
        """Records of every replica done in the running iteration; None
        when the loop is not being iterated."""
        index = self._library.adaptdl_loop_current_index(self._handle)
        return index if self._iterating else None

    @property
    def current_local_bsz(self):
        """This replica's batch in the running (or last) iteration; None before the first."""
        return self._library.adaptdl_loop_local_batch_size(self._handle) or None

    @property
    def current_batch_size(self):
        """The global batch in the running (or last) iteration; None before the first."""
        return self._library.adaptdl_loop_global_batch_size(self._handle) or None

    @property
    def gain(self):
        """AdaScale's gain of the current batch over the initial one (1
        without gradient statistics): the factor for the learning rate."""
        return self._library.adaptdl_loop_gain(self._handle)

    _iterating = False

    def _batches(self):
        """Yields each batch's indices as a list of int."""
        library = _api.api()
        status = library.adaptdl_loop_begin(self._handle)
        if status < 0:
            raise _api.fail("the data loop cannot begin an iteration")
        if status == 0:
            return   # this position of the epoch finished before the restart
        self._iterating = True
        ended = False
        try:
            while True:
                count = library.adaptdl_loop_next(self._handle, self._indices, self._capacity)
                if count < 0:
                    raise _api.fail("the data loop cannot hand out its next batch")
                if count == 0:
                    ended = True
                    return
                yield self._indices[:count]
        finally:
            self._iterating = False
            if not ended:   # left early (break, an exception, the generator collected)
                library.adaptdl_loop_break(self._handle)

    def __iter__(self):
        return self._batches()


class AdaptiveDataLoader(DataLoop):
    """Batches of a map-style dataset (a torch Dataset or a sequence):
    each batch is collate_fn([dataset[i] for i in indices]); collate_fn
    defaults to torch's default_collate (torch is imported for it only)."""

    def __init__(self, dataset, batch_size=1, shuffle=False, collate_fn=None):
        super().__init__(len(dataset), batch_size, shuffle)
        self.dataset = dataset
        self.collate_fn = collate_fn

    def __iter__(self):
        collate = self.collate_fn
        if collate is None:
            from torch.utils.data import default_collate
            collate = default_collate
        for indices in self._batches():
            yield collate([self.dataset[i] for i in indices])
