"""AdaptDL's epochs (adaptdl.torch.epoch): remaining_epochs_until,
current_epoch, finished_epochs, over adaptdl.h's epoch loop."""
from . import _api


def remaining_epochs_until(epoch):
    """Yields the epochs still to run up to `epoch` (exclusive): after a
    restart the loop starts at the first epoch not finished.  Leaving the
    loop early (break) counts the current epoch as finished, as AdaptDL
    does.  AdaptshimError when the library refuses (an epoch loop inside
    another, a data loop iteration left open across epochs)."""
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ValueError("adaptshim: remaining_epochs_until takes a number of epochs, an int "
                         "of at least 0, not %r" % (epoch,))
    library = _api.api()
    current = library.adaptdl_remaining_epochs_until(epoch)
    if current == _api.ERROR:
        raise _api.fail("the epoch loop cannot begin")
    finished = False
    try:
        while current >= 0:
            yield current
            current = library.adaptdl_next_epoch()
            if current == _api.ERROR:
                raise _api.fail("the next epoch cannot begin")
        finished = True
    finally:
        # left early (break, or the generator collected): leave the loop
        if not finished and library.adaptdl_current_epoch() != _api.NONE:
            library.adaptdl_leave_epoch_loop()


def current_epoch():
    """The epoch being run, or None outside remaining_epochs_until."""
    epoch = _api.api().adaptdl_current_epoch()
    return None if epoch == _api.NONE else epoch


def finished_epochs():
    """How many epochs finished, restored across restarts."""
    return _api.api().adaptdl_finished_epochs()


def num_replicas():
    """The job's replica count (MPI's world, torch.distributed's, a variable's, or 1)."""
    return _api.api().adaptdl_num_replicas()


def replica_rank():
    """This replica's rank among them."""
    return _api.api().adaptdl_replica_rank()


def num_restarts():
    """How many restarts came before this run."""
    return _api.api().adaptdl_num_restarts()
