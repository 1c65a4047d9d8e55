"""Which data plane runs: the native functions of ``pumice._native`` (Rust, the crate in
``native/``) or their pure-Python twins.

Every native function has a twin in the module that owns the concept, and the twin is the
reference (differential tests hold the native function to it). ``NATIVE`` is the extension
module, or None when it was not built (no Rust toolchain at install) or when ``PUMICE_PURE=1``
asks for the twins; it is chosen once, at import.
"""

from __future__ import annotations

import os
from types import ModuleType


def _load() -> ModuleType | None:
    if os.environ.get("PUMICE_PURE") == "1":
        return None
    try:
        from pumice import _native
    except ImportError:
        return None
    return _native


NATIVE: ModuleType | None = _load()


def data_plane_line() -> str:
    """The start-up line saying which path runs (one line, logged by ``pumice broker`` and ``pumice dev``)."""
    if NATIVE is not None:
        return "data plane: native (pumice._native); PUMICE_PURE=1 forces the pure-Python path"
    if os.environ.get("PUMICE_PURE") == "1":
        why = "PUMICE_PURE=1"
    else:
        why = "pumice._native is not built (no Rust toolchain when Pumice was installed)"
    return (
        f"data plane: pure Python ({why}); the broker spends about a third more CPU a single send and "
        "twice as much a batched message as on the native path (BENCHMARKS.md); PUMICE_PURE=1 forces this path"
    )
