"""TimerMetrics: ``<storePathRootDir>/config/timermetrics``, the messages each topic has waiting
in the wheel (5.3.3's TimerMetrics, a ConfigManager written as fastjson writes it):

``{"dataVersion":{"counter":N,"stateVersion":0,"timestamp":T},"timingCount":{"<REAL_TOPIC>":
{"count":N,"timeStamp":T}}}`` (fields in fastjson's alphabetical order). Saved with the timer's
flush, once a second, atomically with a ``.bak``.
"""

from __future__ import annotations

import logging
import os
import threading
import time

import orjson

from pumice.common.atomic_file import atomic_write

log = logging.getLogger(__name__)


class TimerMetrics:
    def __init__(self, path: str) -> None:
        self.path = path
        self.timing_count: dict[str, list[int]] = {}  # topic -> [count, timeStamp]
        self.state_version = 0
        self.timestamp = int(time.time() * 1000)
        self.counter = 0
        self._lock = threading.Lock()
        self._dirty = False

    @staticmethod
    def path_in(root_dir: str) -> str:
        return os.path.join(root_dir, "config", "timermetrics")

    def load(self) -> bool:
        """The file, else its .bak; False when what exists cannot be read."""
        for p in (self.path, self.path + ".bak"):
            try:
                with open(p, "rb") as f:
                    doc = orjson.loads(f.read())
                dv = doc.get("dataVersion") or {}
                self.counter, self.state_version = int(dv.get("counter", 0)), int(dv.get("stateVersion", 0))
                self.timestamp = int(dv.get("timestamp", self.timestamp))
                for topic, m in (doc.get("timingCount") or {}).items():
                    self.timing_count[topic] = [int(m.get("count", 0)), int(m.get("timeStamp", 0))]
                return True
            except FileNotFoundError:
                continue
            except (ValueError, AttributeError, TypeError) as e:
                log.error("cannot read %s: %s", p, e)
        return not os.path.exists(self.path)

    def add_and_get(self, topic: str, value: int) -> int:
        with self._lock:
            now = int(time.time() * 1000)
            self.counter += 1  # dataVersion.nextVersion()
            self.timestamp = now
            pair = self.timing_count.setdefault(topic, [0, now])
            pair[0] += value
            pair[1] = now
            self._dirty = True
            return pair[0]

    def timing_count_of(self, topic: str) -> int:
        pair = self.timing_count.get(topic)
        return pair[0] if pair is not None else 0

    def encode(self) -> bytes:
        with self._lock:
            return orjson.dumps({
                "dataVersion": {"counter": self.counter, "stateVersion": self.state_version,
                                "timestamp": self.timestamp},
                "timingCount": {t: {"count": c, "timeStamp": ts} for t, (c, ts) in self.timing_count.items()},
            })  # fmt: skip

    def take_master_copy(self, body: bytes) -> bool:
        """A slave: the master's GET_TIMER_METRICS answer replaces the counts when its
        dataVersion differs (syncTimerMetrics); True when it did. ValueError if it is not one."""
        doc = orjson.loads(body)
        if not isinstance(doc, dict) or not isinstance(doc.get("timingCount", {}), dict):
            raise ValueError("the master's timer metrics are not a JSON object with a timingCount")
        dv = doc.get("dataVersion") or {}
        version = (int(dv.get("counter", 0)), int(dv.get("stateVersion", 0)), int(dv.get("timestamp", 0)))
        counts = {t: [int(m.get("count", 0)), int(m.get("timeStamp", 0))] for t, m in doc["timingCount"].items()}
        with self._lock:
            if version == (self.counter, self.state_version, self.timestamp):
                return False
            self.counter, self.state_version, self.timestamp = version
            self.timing_count = counts
            self._dirty = True
        self.persist()
        return True

    def persist(self) -> None:
        if not self._dirty and os.path.exists(self.path):
            return
        try:
            atomic_write(self.path, self.encode())
            self._dirty = False
        except OSError as e:
            log.warning("cannot save %s: %s", self.path, e)
