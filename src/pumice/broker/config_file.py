"""ConfigFile: a JSON config file written atomically with a ``.bak`` of the previous version.

RocketMQ's ``ConfigManager``: a manager subclasses it, ``encode()`` gives its state as a
JSON-ready dict and ``decode(data)`` takes it back. ``DataVersion`` (below) is the version
stamp the topic and subscription-group files carry and the name server compares.

Files, for ``path`` = ``<storeRoot>/config/topics.json``:

===================  ====================================================================
``topics.json``      the current version
``topics.json.bak``  the version before it
``topics.json.tmp``  only while a write is under way (or after a crash during one)
===================  ====================================================================

``persist()``: serialise the state (under the manager's lock), write ``<path>.tmp``, fsync it,
move ``<path>`` to ``<path>.bak``, rename the temp file to ``<path>``, fsync the directory.
A crash at any point leaves either ``<path>`` or ``<path>.bak`` whole. If ``<path>`` was found
corrupt at load, the first persist does not move it over the good ``.bak``. An ``OSError``
does not raise (a timer thread calls ``persist()``): ``persist()`` returns False and the file
is marked unsaved (``save_state``, a ``SaveRetry``: logged once per cause), and
``retry_persist()``, which the broker calls every second, saves it again once its back-off
has passed, until a save lands. RocketMQ logs the error and forgets it.

``load()`` → ``True``: ``<path>`` was read, or it was missing/empty/corrupt and ``<path>.bak``
was read, or neither file exists (a fresh start). ``False``: a file exists but neither is
readable (the broker should not start on it). JSON that RocketMQ's fastjson writes with
unquoted numeric keys (``{0:12}``, as in a real ``consumerOffset.json``) is accepted too.

``DataVersion`` JSON: ``{"timestamp": 1700000000000, "counter": 3}``; ``next_version()``
sets the timestamp to now (ms) and adds one to the counter.

Locks: ``_lock`` (re-entrant) guards the subclass's tables and ``encode()``; ``_io_lock``
serialises loads and writes, so snapshots reach the disk in the order they were taken. Never
call ``persist()`` while holding ``_lock`` (``persist`` takes ``_io_lock`` then ``_lock``).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from abc import ABC, abstractmethod
from typing import Any

import orjson

from pumice.common.atomic_file import atomic_write
from pumice.common.save_retry import SaveRetry

log = logging.getLogger(__name__)

_JSON_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS
# a JSON string (left alone) or a bare numeric object key after '{' or ',' (quoted)
_BARE_NUMERIC_KEY = re.compile(rb'"(?:[^"\\]|\\.)*"|([{,]\s*)(-?\d+)(\s*:)')


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class DataVersion:
    """RocketMQ's DataVersion: last change time (ms) and a change counter."""

    __slots__ = ("counter", "timestamp")

    def __init__(self, timestamp: int | None = None, counter: int = 0) -> None:
        self.timestamp = _now_ms() if timestamp is None else timestamp
        self.counter = counter

    def next_version(self) -> None:
        self.timestamp = _now_ms()
        self.counter += 1

    def assign(self, other: DataVersion) -> None:
        self.timestamp, self.counter = other.timestamp, other.counter

    def to_json(self) -> dict[str, int]:
        return {"timestamp": self.timestamp, "counter": self.counter}

    @classmethod
    def from_json(cls, data: Any) -> DataVersion:
        if not isinstance(data, dict):
            return cls()
        return cls(int(data.get("timestamp", 0)), int(data.get("counter", 0)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DataVersion) and (self.timestamp, self.counter) == (other.timestamp, other.counter)

    def __hash__(self) -> int:
        return hash((self.timestamp, self.counter))

    def __repr__(self) -> str:
        return f"DataVersion(timestamp={self.timestamp}, counter={self.counter})"


def parse_json(raw: bytes) -> Any:
    """Standard JSON, or fastjson's with unquoted numeric keys. Raises ``orjson.JSONDecodeError``."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        fixed = _BARE_NUMERIC_KEY.sub(lambda m: m.group(0) if m.group(2) is None else b'%s"%s"%s' % m.groups(), raw)
        if fixed == raw:
            raise
        return orjson.loads(fixed)


class ConfigFile(ABC):
    """Base class: subclasses implement ``encode()`` and ``decode(data)``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.RLock()
        self._io_lock = threading.Lock()
        self._main_file_bad = False  # <path> was corrupt at load: do not move it over the good .bak
        self.save_state = SaveRetry(path)  # guarded by _io_lock

    # -- subclass hooks -------------------------------------------------------------------------

    @abstractmethod
    def encode(self) -> dict[str, Any]:
        """The state as a JSON-ready dict. Called with ``_lock`` held."""

    @abstractmethod
    def decode(self, data: Any) -> None:
        """Replace or merge the state from parsed JSON. Raise (ValueError, TypeError, …) on bad data
        without having changed anything."""

    # -- load / persist -------------------------------------------------------------------------

    def _read(self, path: str) -> bytes | None:
        """File contents, or None if missing or empty."""
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None
        return raw if raw.strip() else None

    def _try_decode(self, path: str, raw: bytes) -> bool:
        try:
            data = parse_json(raw)
            with self._lock:
                self.decode(data)
        except (ValueError, TypeError, KeyError, AttributeError) as e:  # JSONDecodeError is a ValueError
            log.warning("cannot read %s: %s", path, e)
            return False
        log.info("loaded %s", path)
        return True

    def load(self) -> bool:
        with self._io_lock:
            self._main_file_bad = False
            bak = self.path + ".bak"
            raw = self._read(self.path)
            if raw is not None:
                if self._try_decode(self.path, raw):
                    return True
                self._main_file_bad = True
            raw_bak = self._read(bak)
            if raw_bak is None:
                if self._main_file_bad:
                    log.error("%s is corrupt and there is no %s", self.path, bak)
                    return False
                return True  # fresh start
            if self._try_decode(bak, raw_bak):
                if self._main_file_bad:
                    log.warning("%s is corrupt; loaded %s instead", self.path, bak)
                return True
            return False

    def take_master_copy(self, data: Any, table: dict[str, Any]) -> None:
        """SlaveSynchronize: make ``table`` (this file's table) the master's ``data``, then
        persist; on bad data nothing changes.

        Readers do not take the lock, so an entry the master also has is never missing
        meanwhile: ``decode`` replaces entries in place (each by a new object, so an
        entry whose object is unchanged was not in the master's copy), then the others go."""
        with self._lock:
            saved = dict(table)
            self.decode(data)  # raises before changing anything
            for key, value in saved.items():
                if table.get(key) is value:
                    del table[key]
        self.persist()

    def snapshot(self) -> bytes:
        """The file's bytes for the current state (under ``_lock``)."""
        with self._lock:
            return orjson.dumps(self.encode(), option=_JSON_OPTIONS)

    def persist(self) -> bool:
        """Save the current state; False if it could not be (the file is then unsaved)."""
        with self._io_lock:
            return self._write(self.snapshot())

    def retry_persist(self) -> bool | None:
        """Save again a file whose last save failed, once its back-off has passed: None when
        there was nothing to do, else whether the save landed."""
        if not self.save_state.due():  # read without the lock: a stale answer waits one round
            return None
        return self.persist()

    @property
    def unsaved_cause(self) -> str | None:
        """Why the state in memory is not on disk (the last save's error), or None."""
        return self.save_state.cause

    def _write(self, data: bytes) -> bool:
        """Atomic replace of ``path`` by ``data``; called with ``_io_lock`` held. False on OSError."""
        try:
            atomic_write(self.path, data, keep_backup=not self._main_file_bad)
        except OSError as e:
            self.save_state.failed(e)
            return False
        self._main_file_bad = False
        self.save_state.saved()
        return True
