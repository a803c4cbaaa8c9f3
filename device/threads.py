"""The device's compute budget: one core for BLAS, as for the ONNX session.

Invariants:
- ``device/__init__`` sets ``OPENBLAS_NUM_THREADS``/``OMP_NUM_THREADS``/
  ``MKL_NUM_THREADS`` to ``BLAS_THREADS`` unless the environment already says
  otherwise, so numpy loaded after it starts one BLAS thread.
- ``pin_blas`` also pins an OpenBLAS that was loaded before (numpy imported first)
  through its own ``set_num_threads`` entry point, once per process; it never fails
  (no OpenBLAS found: nothing to pin).
"""

from __future__ import annotations

import ctypes
import os
import threading

BLAS_THREADS = 1
ENV_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
_SETTERS = (
    "scipy_openblas_set_num_threads64_",
    "scipy_openblas_set_num_threads",
    "openblas_set_num_threads64_",
    "openblas_set_num_threads",
)

_GETTERS = tuple(name.replace("set_", "get_") for name in _SETTERS)

_lock = threading.Lock()
_pinned = False


def set_environment() -> None:
    """The environment numpy reads when it loads BLAS (a value already set stays)."""
    for name in ENV_VARS:
        os.environ.setdefault(name, str(BLAS_THREADS))


def _openblas_paths() -> list[str]:
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            lines = maps.read().splitlines()
    except OSError:
        return []
    return sorted(
        {line.split()[-1] for line in lines if "openblas" in line.lower() and "/" in line}
    )


def pin_blas() -> None:
    """One BLAS thread from now on in this process, whenever numpy was loaded."""
    global _pinned
    with _lock:
        if _pinned:
            return
        _pinned = True
        wanted = int(os.environ.get("OPENBLAS_NUM_THREADS", BLAS_THREADS) or BLAS_THREADS)
        for path in _openblas_paths():
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for name in _SETTERS:
                setter = getattr(lib, name, None)
                if setter is not None:
                    setter(ctypes.c_int(wanted))
                    break


def blas_threads() -> int | None:
    """How many threads the loaded OpenBLAS uses (None: none loaded, or it cannot say)."""
    for path in _openblas_paths():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in _GETTERS:
            getter = getattr(lib, name, None)
            if getter is not None:
                getter.restype = ctypes.c_int
                return int(getter())
    return None
