"""configBlackList: the config keys a remote update may not change.

UPDATE_NAMESRV_CONFIG (318) and UPDATE_BROKER_CONFIG (25) refuse a body holding any of them with
NO_PERMISSION and the remark ``Can not update config in black list. (<key as sent>, …)``
(RocketMQ 4.9.8's code and remark; it does not name the keys), and apply nothing of that body.

A key is compared by the field it names, found the way the conf loader finds it
(``field_for_key``: the class's alias, else ``camel_to_snake``), so every spelling the loader
accepts for a listed key is refused: ``configStorePath``, ``ConfigStorePath``,
``config_store_path``, ``configStore_path``, a Kelvin sign for its k (``str.lower`` makes it k), …
RocketMQ 4.9.8 compares the keys as sent, which is enough there only because its loader takes
the exact spelling alone.

===========  =================================================  ==================================
server       always refused (RocketMQ 4.9.8's; Pumice's)        ``configBlackList`` default (4.9.8)
===========  =================================================  ==================================
name server  configBlackList, configStorePath, kvConfigPath,    ``configBlackList;configStorePath;
             rocketmqHome; tlsMode, tlsServerNeedClientAuth,    kvConfigPath``
             every path-like key
broker       brokerConfigPath, rocketmqHome, configBlackList;   ``configBlackList;brokerConfigPath``
             every path-like key
===========  =================================================  ==================================

``configBlackList`` itself is always listed: a client could otherwise empty the list first.
Path-like: a text field or an ``IGNORED_KEYS`` key of the server's config classes whose name
holds the word Path or Paths, or ends in Dir, Home, File or Checkpoint (storePathRootDir,
storePathCommitLog, kvConfigPath, logDir, rocketmqHome, tlsServerCertPath, abortFile,
storeCheckpoint, …). They are found in the classes, so a key added later is refused too: a
remote client must not choose where a server reads or writes files. The list is built once, at
start, from the start-time configBlackList, as RocketMQ's processors build theirs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import get_type_hints

from pumice.config import camel_to_snake, field_for_key, snake_to_camel

REMARK = "Can not update config in black list."
_PATH_ENDINGS = frozenset({"dir", "home", "file", "checkpoint"})


def is_path_like(field: str) -> bool:
    """Whether a snake_case config name names a file or directory (see the module docstring)."""
    words = field.split("_")
    return "path" in words or "paths" in words or words[-1] in _PATH_ENDINGS


def path_like_keys(*classes: type) -> list[str]:
    """The RocketMQ keys of the classes' path-like text fields and ignored keys."""
    keys: list[str] = []
    for cls in classes:
        hints = get_type_hints(cls)
        names = getattr(cls, "CONF_NAMES", {})
        for f in dataclasses.fields(cls):
            if hints[f.name] in (str, str | None) and is_path_like(f.name):
                keys.append(names.get(f.name) or snake_to_camel(f.name))
        keys += [k for k in getattr(cls, "IGNORED_KEYS", {}) if is_path_like(camel_to_snake(k))]
    return keys


class ConfigBlackList:
    """The keys of ``always``, the path-like keys of ``classes`` and the ``;``-separated
    ``configured`` list, each under every spelling the loader maps to it for ``classes``."""

    def __init__(self, classes: Sequence[type], always: Iterable[str], configured: str) -> None:
        self._classes = tuple(classes)
        listed = [*always, *path_like_keys(*classes), *configured.split(";")]
        self.keys = frozenset(k.strip() for k in listed if k.strip())
        self._fields = frozenset(f for k in self.keys for f in self._fields_of(k))

    def _fields_of(self, key: str) -> set[str]:
        return {field_for_key(cls, key) for cls in self._classes}

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and not self._fields.isdisjoint(self._fields_of(key.strip()))

    def refused(self, keys: Iterable[str]) -> list[str]:
        """The keys (as sent) that are black-listed, in order."""
        return [k for k in keys if k in self]

    def remark(self, refused: Sequence[str]) -> str:
        return f"{REMARK} ({', '.join(refused)})"
