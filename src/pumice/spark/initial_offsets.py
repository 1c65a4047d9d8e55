"""A stream's initial offsets kept on disk (option ``initialOffsetsPath``), as Kafka's source keeps
them in the checkpoint.

Spark's Kafka source writes the offsets it resolved for ``latest`` (or a timestamp) into the
query's checkpoint (``<checkpoint>/sources/<n>/0``) before its first micro-batch, so a query
killed before that batch ends reads from the same place when restarted. A Python source cannot:
PySpark 4.3 drops the checkpoint path (``PythonScan.toMicroBatchStream(checkpointLocation)``
does not pass it on to ``PythonMicroBatchStream``, and ``python_streaming_source_runner.py``
hands the reader only its options and schema). The user names a directory instead, best
inside the query's checkpoint; the stream reader calls ``load`` in ``initialOffset`` and
``store`` when it has resolved them the first time.

One file, ``<initialOffsetsPath>/initial-offsets.json``, written whole (``atomic_write``:
temporary file, fsync, rename, fsync of the directory) and never changed afterwards:

===============  ========================================================================
key              value
===============  ========================================================================
``version``      1
``topics``       the query's topics (sorted), or null with a ``topicPattern``
``topicPattern`` the query's regex, or null
``offsets``      topic → brokerName → queueId (a string) → the first offset to read, as
                 the stream's offsets JSON
===============  ========================================================================

A file written for other topics (the directory shared by two queries) or not of this form is
refused with an ``OptionError`` naming it: reading from the wrong place silently is what the
option is there to prevent.
"""

from __future__ import annotations

import json
import os
from typing import Any

from pumice.common.atomic_file import atomic_write
from pumice.spark.options import BrokerReadOptions, OptionError

FILE_NAME = "initial-offsets.json"
VERSION = 1

# topic -> brokerName -> str(queueId) -> offset, as broker_stream's StreamOffsets
Offsets = dict[str, dict[str, dict[str, int]]]


def _identity(opts: BrokerReadOptions) -> dict[str, Any]:
    return {"topics": sorted(opts.topics) if opts.topic_pattern is None else None, "topicPattern": opts.topic_pattern}


def _path(directory: str) -> str:
    return os.path.join(directory, FILE_NAME)


def _valid_offsets(doc: Any) -> bool:
    return isinstance(doc, dict) and all(
        isinstance(brokers, dict)
        and all(
            isinstance(queues, dict)
            and all(
                str(q).isdigit() and isinstance(off, int) and not isinstance(off, bool) and off >= 0
                for q, off in queues.items()
            )
            for queues in brokers.values()
        )
        for brokers in doc.values()
    )


def load(directory: str, opts: BrokerReadOptions) -> Offsets | None:
    """The kept offsets, or None when none were kept yet."""
    path = _path(directory)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise OptionError(f"option initialOffsetsPath: cannot read {path}: {e}") from None
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or doc.get("version") != VERSION or not _valid_offsets(doc.get("offsets")):
        raise OptionError(f"option initialOffsetsPath: {path} is not an initial offsets file of the pumice source")
    kept = {"topics": doc.get("topics"), "topicPattern": doc.get("topicPattern")}
    if kept != _identity(opts):
        raise OptionError(
            f"option initialOffsetsPath: {path} holds the initial offsets of a query reading {_describe(kept)}, "
            f"not {_describe(_identity(opts))}: give each query its own directory, inside its checkpoint"
        )
    return doc["offsets"]


def _describe(identity: dict[str, Any]) -> str:
    if identity.get("topicPattern") is not None:
        return f"topicPattern {identity['topicPattern']!r}"
    return f"topics {','.join(identity.get('topics') or [])}"


def store(directory: str, opts: BrokerReadOptions, offsets: Offsets) -> None:
    """Write the offsets once, atomically (see the module's table)."""
    doc = {"version": VERSION, **_identity(opts), "offsets": offsets}
    try:
        atomic_write(_path(directory), json.dumps(doc, sort_keys=True).encode(), keep_backup=False)
    except OSError as e:
        raise OptionError(f"option initialOffsetsPath: cannot write {_path(directory)}: {e}") from None
