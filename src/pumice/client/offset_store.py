"""Consumer offset stores: where a push consumer keeps the consumed offset of each queue.

* ``RemoteBrokerOffsetStore`` (CLUSTERING): offsets live on the queue's broker
  (QUERY_CONSUMER_OFFSET 14 to read, UPDATE_CONSUMER_OFFSET 15 to write); the consumer keeps
  the latest ones in memory and writes them every persistConsumerOffsetInterval, when a queue
  is re-balanced away and at shutdown.
* ``LocalFileOffsetStore`` (BROADCASTING): every member consumes every queue, so each keeps
  its own offsets in a JSON file, never on the broker. Default path:
  ``~/.pumice/offsets/<clientId>/<group>/offsets.json``. The file is Java's
  OffsetSerializeWrapper shape, ``{"offsetTable": {"<MessageQueue JSON>": offset}}``, written
  to a temporary file and renamed over the old one (which is kept as ``offsets.json.bak``
  and read when the main file is missing or unreadable).

``read_offset(mq, ReadOffsetType)``: MEMORY (the cached value, -1 if none), STORE (the
broker or the file; -1 if it has none, MQClientError when it cannot be asked) or
MEMORY_THEN_STORE. ``update_offset(mq, offset, increase_only)`` only changes memory.
"""

from __future__ import annotations

import abc
import logging
import os
from collections.abc import Iterable
from enum import Enum
from pathlib import Path
from typing import Any

import orjson

from pumice.client.exceptions import MQBrokerError, MQClientError
from pumice.client.message import MessageQueue
from pumice.common.atomic_file import atomic_write
from pumice.remoting.response_code import ResponseCode

log = logging.getLogger(__name__)


class ReadOffsetType(Enum):
    MEMORY = "READ_FROM_MEMORY"
    STORE = "READ_FROM_STORE"
    MEMORY_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


class OffsetStore(abc.ABC):
    """The in-memory table both stores share; subclasses read and write the durable copy."""

    def __init__(self, group: str) -> None:
        self.group = group
        self.offset_table: dict[MessageQueue, int] = {}

    async def load(self) -> None:  # noqa: B027 - a hook: only the file store reads up front
        """Read what is stored up front (the file store); nothing for the broker store."""

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        if offset < 0:
            return
        old = self.offset_table.get(mq)
        if old is None or not increase_only or offset > old:
            self.offset_table[mq] = offset

    async def read_offset(self, mq: MessageQueue, kind: ReadOffsetType = ReadOffsetType.MEMORY_THEN_STORE) -> int:
        if kind is not ReadOffsetType.STORE:
            off = self.offset_table.get(mq)
            if off is not None:
                return off
            if kind is ReadOffsetType.MEMORY:
                return -1
        off = await self._read_stored(mq)
        if off >= 0:
            self.update_offset(mq, off)
        return off

    @abc.abstractmethod
    async def _read_stored(self, mq: MessageQueue) -> int:
        """The offset kept for ``mq`` on the brokers or on disk (-1: none)."""

    def remove_offset(self, mq: MessageQueue) -> None:
        self.offset_table.pop(mq, None)

    async def persist(self, mq: MessageQueue) -> None:
        await self.persist_all([mq])

    @abc.abstractmethod
    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """Write the offsets of ``mqs`` to where this store keeps them."""


class RemoteBrokerOffsetStore(OffsetStore):
    """Offsets on the brokers (``instance`` is the consumer's MQClientInstance)."""

    def __init__(self, instance: Any, group: str) -> None:
        super().__init__(group)
        self.instance = instance

    async def _read_stored(self, mq: MessageQueue) -> int:
        addr = await self.instance.broker_addr(mq)
        try:
            return int(await self.instance.api.query_consumer_offset(addr, self.group, mq.topic, mq.queue_id))
        except MQBrokerError as e:
            if e.code == ResponseCode.QUERY_NOT_FOUND:
                return -1
            raise

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """Write the offsets of ``mqs`` (only those with a value in memory); failures are logged."""
        for mq in list(mqs):
            off = self.offset_table.get(mq)
            if off is None:
                continue
            try:
                addr = await self.instance.broker_addr(mq)
                await self.instance.api.update_consumer_offset(addr, self.group, mq.topic, mq.queue_id, off)
            except MQClientError as e:
                log.info("cannot store the offset %d of %s for %s: %s", off, mq, self.group, e)


def default_offset_file(client_id: str, group: str) -> Path:
    safe_cid = client_id.replace(os.sep, "_")
    return Path.home() / ".pumice" / "offsets" / safe_cid / group / "offsets.json"


class LocalFileOffsetStore(OffsetStore):
    """Offsets in a local JSON file (``path``, or the default for ``client_id``)."""

    def __init__(self, group: str, client_id: str = "", path: str | os.PathLike[str] | None = None) -> None:
        super().__init__(group)
        self.path = Path(path) if path is not None else default_offset_file(client_id, group)
        self._stored: dict[MessageQueue, int] = {}

    @property
    def backup_path(self) -> Path:
        return self.path.with_name(self.path.name + ".bak")

    @staticmethod
    def _parse(data: bytes) -> dict[MessageQueue, int]:
        table = orjson.loads(data).get("offsetTable") or {}
        return {MessageQueue.from_json(orjson.loads(k)): int(v) for k, v in table.items()}

    def read_file(self) -> dict[MessageQueue, int]:
        """The stored table ({} when there is no readable file)."""
        for p in (self.path, self.backup_path):
            try:
                return self._parse(p.read_bytes())
            except FileNotFoundError:
                continue
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                log.warning("the offset file %s is unreadable: %s", p, e)
        return {}

    async def load(self) -> None:
        self._stored = self.read_file()
        for mq, off in self._stored.items():
            self.update_offset(mq, off)

    async def _read_stored(self, mq: MessageQueue) -> int:
        self._stored = self.read_file()
        return self._stored.get(mq, -1)

    def write_file(self, table: dict[MessageQueue, int]) -> None:
        data = orjson.dumps(
            {"offsetTable": {orjson.dumps(mq.to_json()).decode(): off for mq, off in sorted(table.items())}},
            option=orjson.OPT_INDENT_2,
        )
        atomic_write(self.path, data)

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """Write the whole memory table (queues in ``mqs`` and any kept from before)."""
        self._stored.update(self.offset_table)
        try:
            self.write_file(self._stored)
        except OSError as e:
            log.warning("cannot write the offset file %s: %s", self.path, e)
