"""KVConfigManager: namespaced key/value settings kept by the name server (kvConfig.json).

File: ``{"configTable": {namespace: {key: value}}}``, written atomically (temp file, fsync,
rename) with the previous version kept as ``.bak``.

A save that fails (``OSError``: a full disk) keeps the change in memory and marks the file
unsaved (``save_state``, a SaveRetry: logged once per cause); ``put``/``delete`` then return
False (the request is answered SYSTEM_ERROR) and ``retry_persist()``, which the name server
calls every second, saves it again once its back-off has passed. RocketMQ logs and forgets.
"""

from __future__ import annotations

import logging
import threading

import orjson

from pumice.common.atomic_file import atomic_write
from pumice.common.save_retry import SaveRetry

log = logging.getLogger(__name__)


class KVConfigManager:
    def __init__(self, path: str) -> None:
        self.path = path
        self.config_table: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()
        self.save_state = SaveRetry(path)  # guarded by _lock

    def load(self) -> bool:
        """The file, else its .bak; True when one was read or neither exists. False when what
        exists cannot be read (upstream's name server exits): starting empty would lose the
        KV config, and the next two saves would rotate the unreadable file away."""
        bad = False
        for p in (self.path, self.path + ".bak"):
            try:
                with open(p, "rb") as f:
                    data = orjson.loads(f.read())
                table = data.get("configTable", {}) if isinstance(data, dict) else None
                if not isinstance(table, dict) or not all(isinstance(kv, dict) for kv in table.values()):
                    raise ValueError("no configTable object of namespace objects")
                self.config_table = {str(ns): {str(k): str(v) for k, v in kv.items()} for ns, kv in table.items()}
                if bad:
                    log.warning("%s is corrupt; loaded %s instead", self.path, p)
                return True
            except FileNotFoundError:
                continue
            except ValueError as e:  # orjson.JSONDecodeError is a ValueError
                log.error("cannot read %s: %s", p, e)
                bad = True
        return not bad

    def _persist(self) -> bool:
        """Save (under ``_lock``); False if it failed (the file is then unsaved)."""
        try:
            atomic_write(self.path, orjson.dumps({"configTable": self.config_table}, option=orjson.OPT_INDENT_2))
        except OSError as e:
            self.save_state.failed(e)
            return False
        self.save_state.saved()
        return True

    def retry_persist(self) -> bool | None:
        """Save again after a failed save, once its back-off has passed: None when there was
        nothing to do, else whether the save landed."""
        with self._lock:
            if not self.save_state.due():
                return None
            return self._persist()

    @property
    def unsaved_cause(self) -> str | None:
        """Why the table in memory is not on disk (the last save's error), or None."""
        return self.save_state.cause

    def put(self, namespace: str, key: str, value: str) -> bool:
        """Set and save; False if the save failed (the value is set, and saved again later)."""
        with self._lock:
            self.config_table.setdefault(namespace, {})[key] = value
            return self._persist()

    def get(self, namespace: str, key: str) -> str | None:
        return self.config_table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> bool:
        """Remove and save; False if the save failed (the key is gone, and saved again later)."""
        with self._lock:
            ns = self.config_table.get(namespace)
            if ns is not None and ns.pop(key, None) is not None:
                return self._persist()
            return self.save_state.cause is None

    def get_by_namespace(self, namespace: str) -> dict[str, str] | None:
        ns = self.config_table.get(namespace)
        return dict(ns) if ns else None
