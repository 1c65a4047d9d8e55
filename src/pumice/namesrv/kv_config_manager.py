"""KVConfigManager: namespaced key/value settings kept by the name server (kvConfig.json).

File: ``{"configTable": {namespace: {key: value}}}``, written atomically (temp file, fsync,
rename) with the previous version kept as ``.bak``.
"""

from __future__ import annotations

import logging
import threading

import orjson

from pumice.common.atomic_file import atomic_write

log = logging.getLogger(__name__)


class KVConfigManager:
    def __init__(self, path: str) -> None:
        self.path = path
        self.config_table: dict[str, dict[str, str]] = {}
        self._lock = threading.Lock()

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

    def _persist(self) -> None:
        atomic_write(self.path, orjson.dumps({"configTable": self.config_table}, option=orjson.OPT_INDENT_2))

    def put(self, namespace: str, key: str, value: str) -> None:
        with self._lock:
            self.config_table.setdefault(namespace, {})[key] = value
            self._persist()

    def get(self, namespace: str, key: str) -> str | None:
        return self.config_table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        with self._lock:
            ns = self.config_table.get(namespace)
            if ns is not None and ns.pop(key, None) is not None:
                self._persist()

    def get_by_namespace(self, namespace: str) -> dict[str, str] | None:
        ns = self.config_table.get(namespace)
        return dict(ns) if ns else None
