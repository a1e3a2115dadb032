"""adaptshim - the Python side of libadaptshim.so.

Two things live in this package, both thin glue over the C library's
exported API (adaptdl.h); the logic stays in C:

- the cooperative API for Python trainers that opt in (`import adaptshim`):
  AdaptDL's epochs, accumulators, the data loop and registered state;
- the transparent gradient statistics for unmodified PyTorch trainers,
  installed by the project's sitecustomize when libadaptshim.so is
  preloaded into a Python process.

Without the preload the package answers as one replica with nothing to
restore (the stand-in libadaptdl.so, when it can be found), so a trainer
runs as it is.
"""

# --- the cooperative API (AdaptDL's names; each module is thin glue over
# adaptdl.h).  None of these imports torch: the pieces that need it
# import it when they are used.
from ._api import AdaptshimError
from ._accumulator import Accumulator
from ._collective import finalize
from ._data_loop import AdaptiveDataLoader, DataLoop
from ._epochs import (current_epoch, finished_epochs, num_replicas, num_restarts,
                      remaining_epochs_until, replica_rank)
from ._state import State, register_state, synchronize_states

__all__ = ["AdaptshimError", "Accumulator", "AdaptiveDataLoader", "DataLoop", "State",
           "current_epoch", "finalize", "finished_epochs", "num_replicas", "num_restarts",
           "register_state", "remaining_epochs_until", "replica_rank", "synchronize_states"]
