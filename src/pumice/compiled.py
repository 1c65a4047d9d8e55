"""Which modules the package build may compile with mypyc, and which of them are compiled here.

``PUMICE_COMPILE=1 pip install --no-build-isolation .`` (mypy, which carries mypyc, installed
first: the ``test`` extra has it) compiles the modules below from their ``.py`` source into C
extensions; a plain install, and an editable one, runs them as Python. Both paths are the same
source and are tested in CI (``.ci/run``). They are the per-message hot paths that profiles of the
broker and the client showed the interpreter to be the limit of (BENCHMARKS.md, issue 19).

setup.py reads ``COMPILED_MODULES`` with ``runpy``: this module imports nothing from pumice.
"""

from __future__ import annotations

import importlib
import importlib.machinery

COMPILED_MODULES: tuple[str, ...] = (
    # the wire: frames, headers, the server's and the client's request loops
    "pumice.remoting.remoting_command",
    "pumice.remoting.remoting_codec",
    "pumice.remoting.remoting_server",
    "pumice.remoting.remoting_client",
    # records and their properties
    "pumice.common.message_decoder",
    "pumice.common.java_hash",
    "pumice.store.message_check",
    # the broker's send and pull paths
    "pumice.broker.send_message_processor",
    "pumice.broker.put_message_waiter",
    "pumice.broker.pull_message_processor",
    "pumice.store.get_message_result",
    # dispatch: ConsumeQueue and index entries
    "pumice.store.dispatch_request",
    "pumice.store.index_service",
    "pumice.store.index_file",
    # the client's send and receive paths
    "pumice.client.message_id",
    "pumice.client.producer",
    "pumice.client.process_queue",
)


def compiled_modules() -> list[str]:
    """The modules of ``COMPILED_MODULES`` that were loaded from a C extension (imports them)."""
    out = []
    for name in COMPILED_MODULES:
        path = getattr(importlib.import_module(name), "__file__", "") or ""
        if path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
            out.append(name)
    return out
