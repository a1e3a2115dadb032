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
