"""adaptshim's sitecustomize: transparent gradient statistics for PyTorch.

Python runs the first `sitecustomize` it finds on sys.path; adaptdl-wrap
puts this directory on PYTHONPATH, so this one runs and then runs the one
it hides (Debian's, a virtual environment's), as if it had been found.

It acts only when libadaptshim.so is preloaded into this process (a look
at LD_PRELOAD: no ctypes, no torch at start-up).  Then it waits for the
trainer's own `import torch` (an import hook; it never imports torch
itself) and, once torch is loaded, hands it to adaptshim._torch_statistics,
which installs the DistributedDataParallel hook and the optimizer-step
measurement.  A program that never imports torch pays for a string search
and one entry in sys.meta_path.
"""
import os
import sys


class _AdaptshimTorchWatcher:
    """A meta path finder that answers for nothing: when `torch` is about
    to be imported, it lets the other finders find it, and arranges for the
    statistics to be installed once the module has run."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "torch":
            return None
        try:
            sys.meta_path.remove(cls)
        except ValueError:
            pass
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader = spec.loader
        run_module = loader.exec_module

        def exec_module(module):
            run_module(module)
            try:
                del loader.exec_module   # back to the loader's own method
            except AttributeError:
                pass
            try:
                from adaptshim import _torch_statistics
                _torch_statistics.install(module)
            except Exception as error:  # the trainer's import must never fail here
                sys.stderr.write("adaptshim: no gradient statistics for PyTorch: %s\n"
                                 % error)

        loader.exec_module = exec_module
        return spec


def _adaptshim_chain_next_sitecustomize():
    """Runs the sitecustomize that this one hides: the first one further
    on sys.path than this directory."""
    here = os.path.dirname(os.path.abspath(__file__))
    later = None
    for index, entry in enumerate(sys.path):
        if os.path.abspath(entry or os.curdir) == here:
            later = sys.path[index + 1:]
            break
    if later is None:
        return
    # the interpreter's own path finder (importlib.machinery.PathFinder is
    # this object; importing importlib would cost milliseconds at start-up)
    bootstrap = sys.modules.get("_frozen_importlib_external")
    if bootstrap is not None:
        PathFinder = bootstrap.PathFinder
    else:
        from importlib.machinery import PathFinder
    spec = PathFinder.find_spec("sitecustomize", later)
    if spec is None or spec.loader is None or spec.origin == os.path.abspath(__file__):
        return
    module = type(sys)(spec.name)
    module.__file__ = spec.origin
    module.__spec__ = spec
    module.__loader__ = spec.loader
    spec.loader.exec_module(module)


if "libadaptshim" in os.environ.get("LD_PRELOAD", "") and "torch" not in sys.modules:
    sys.meta_path.insert(0, _AdaptshimTorchWatcher)
_adaptshim_chain_next_sitecustomize()
