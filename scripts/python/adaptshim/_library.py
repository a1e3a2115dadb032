"""The C library behind the package, found once.

Under the preload, libadaptshim.so's exported adaptdl_* functions are in
the process's global symbol scope, so the program's own handle reaches
them.  Without it, the stand-in libadaptdl.so (installed next to
libadaptshim.so by `make install`, or named by ADAPTSHIM_STANDALONE) answers
as one replica.  ctypes is imported here, never at interpreter start-up.
"""
import ctypes
import os

_library = None


def _preloaded():
    """The process's global scope when libadaptshim.so was preloaded."""
    program = ctypes.CDLL(None)
    try:
        program.adaptdl_num_replicas
    except AttributeError:
        return None
    return program


def _standalone():
    """The stand-in libadaptdl.so, or None when it cannot be found."""
    candidates = []
    named = os.environ.get("ADAPTSHIM_STANDALONE")
    if named:
        candidates.append(named)
    here = os.path.dirname(os.path.abspath(__file__))
    # Installed layout: PREFIX/share/adaptshim/python/adaptshim/ -> PREFIX/lib.
    candidates.append(os.path.join(here, "..", "..", "..", "..", "lib", "libadaptdl.so"))
    candidates.append("libadaptdl.so")
    for candidate in candidates:
        try:
            return ctypes.CDLL(candidate)
        except OSError:
            continue
    return None


def library():
    """The library (preloaded, else the stand-in); raises OSError with one
    line when neither is there."""
    global _library
    if _library is None:
        _library = _preloaded() or _standalone()
        if _library is None:
            raise OSError("adaptshim: libadaptshim.so is not preloaded and libadaptdl.so "
                          "was not found (set ADAPTSHIM_STANDALONE to its path, or run "
                          "under adaptdl-wrap)")
    return _library


def is_preloaded():
    """True when libadaptshim.so is preloaded into this process."""
    return isinstance(library(), ctypes.CDLL) and _preloaded() is not None
