"""RocketMQ-style ``.conf`` files (Java properties) into typed config dataclasses.

Keys are RocketMQ's camelCase names (``listenPort``, ``brokerClusterName``, …); each maps to
the dataclass field of the same name in snake_case (``CONF_ALIASES`` lists other spellings,
``CONF_NAMES`` the spelling written back). An unknown key or a value that does not parse stops
start-up with a ``ConfigError`` that names it.

Every key of RocketMQ 4.9.8's BrokerConfig, NettyServerConfig, NettyClientConfig and
MessageStoreConfig (broker.conf) and of its NamesrvConfig and NettyServerConfig (namesrv.conf)
is accepted under its Java spelling: the keys are the setters' names, as
``MixAll.properties2Object`` reads them. A key Pumice has no use for (a Java thread pool,
Netty buffers, DLedger's peers, …) is in the config class's ``IGNORED_KEYS``: accepted, so an
existing broker.conf starts, silently at RocketMQ 4.9.8's default (``ignored_key_defaults``) and
otherwise named, with why, in one warning line for the whole file, unless its value asks for a feature
Pumice lacks (``enableDLegerCommitLog=true``), which is
refused naming the key and the reason.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import re
from typing import Any, get_type_hints

from pumice.ignored_key_defaults import at_rocketmq_default

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")
log = logging.getLogger(__name__)


_FIELD_TYPES: dict[type, dict[str, Any]] = {}


def _field_types(cls: type) -> dict[str, Any]:
    """A config class's field types: ``get_type_hints`` re-evaluates the annotations on every call
    (85 % of a load of many keys), and a class's never change."""
    hints = _FIELD_TYPES.get(cls)
    if hints is None:
        hints = _FIELD_TYPES[cls] = get_type_hints(cls)
    return hints


def ignored(reason: str, *accepted: str) -> tuple[frozenset[str] | None, str]:
    """An ``IGNORED_KEYS`` entry: any value is accepted, or only ``accepted`` (lower case)."""
    return (frozenset(accepted) if accepted else None), reason


class ConfigError(ValueError):
    pass


# NettyServerConfig / TLS keys of both servers' conf files: Netty's own tuning, no Pumice meaning
_ONE_LOOP = "one asyncio event loop serves every connection"
_WATER_MARKS = "a connection is not read while over 4 MiB of its replies are unsent, and again under 1 MiB"
NETTY_SERVER_IGNORED_KEYS: dict[str, tuple[frozenset[str] | None, str]] = {
    "serverWorkerThreads": ignored(_ONE_LOOP),
    "serverCallbackExecutorThreads": ignored(_ONE_LOOP),
    "serverSelectorThreads": ignored(_ONE_LOOP),
    "serverOnewaySemaphoreValue": ignored(_ONE_LOOP),
    "serverAsyncSemaphoreValue": ignored(_ONE_LOOP),
    "useEpollNativeSelector": ignored("uvloop uses epoll already"),
    "serverSocketSndBufSize": ignored("the kernel sizes socket buffers"),
    "serverSocketRcvBufSize": ignored("the kernel sizes socket buffers"),
    "serverSocketBacklog": ignored("asyncio's listen backlog is used"),
    "serverPooledByteBufAllocatorEnable": ignored("a Netty buffer setting"),
    "useTLS": ignored("it is a client setting: TLS on this port is tlsMode", "false"),
    "writeBufferHighWaterMark": ignored(_WATER_MARKS),
    "writeBufferLowWaterMark": ignored(_WATER_MARKS),
}

# NettyClientConfig: the broker's own connections (to the name servers, a slave's to its master);
# RocketMQ's broker reads these from broker.conf, its name server does not
_CLIENT = "a Netty client setting: the broker's connections to name servers and master run on its event loop"
NETTY_CLIENT_IGNORED_KEYS: dict[str, tuple[frozenset[str] | None, str]] = {
    "clientWorkerThreads": ignored(_CLIENT),
    "clientCallbackExecutorThreads": ignored(_CLIENT),
    "clientOnewaySemaphoreValue": ignored(_CLIENT),
    "clientAsyncSemaphoreValue": ignored(_CLIENT),
    "connectTimeoutMillis": ignored("the broker's client connects within 3 s, RocketMQ's default"),
    "channelNotActiveInterval": ignored(_CLIENT),
    "clientChannelMaxIdleTimeSeconds": ignored(_CLIENT),
    "clientSocketSndBufSize": ignored("the kernel sizes socket buffers"),
    "clientSocketRcvBufSize": ignored("the kernel sizes socket buffers"),
    "clientPooledByteBufAllocatorEnable": ignored("a Netty buffer setting"),
    "clientCloseSocketIfTimeout": ignored(_CLIENT),
    "useTLS": ignored("it is a client setting: TLS on this port is tlsMode", "false"),
    # and writeBufferHighWaterMark / writeBufferLowWaterMark, keys of both: NETTY_SERVER_IGNORED_KEYS
}


def camel_to_snake(name: str) -> str:
    return _CAMEL.sub("_", name).lower()


def snake_to_camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def field_for_key(cls: type, key: str) -> str:
    """The field of config class ``cls`` that ``apply_properties`` sets for ``key`` (whether
    ``cls`` has it or not): its ``CONF_ALIASES`` entry, else ``camel_to_snake(key)``, so
    ``configStorePath``, ``ConfigStorePath`` and ``config_store_path`` all name ``config_store_path``."""
    return getattr(cls, "CONF_ALIASES", {}).get(key) or camel_to_snake(key)


def parse_properties(text: str, source: str = "<config>") -> dict[str, str]:
    """Java properties: ``key=value`` or ``key: value`` lines, ``#`` and ``!`` comments."""
    out: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        m = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if not m:
            raise ConfigError(f"{source}:{n}: cannot read {raw!r} (expected key=value)")
        out[m.group(1)] = m.group(2).strip()
    return out


def load_properties(path: str) -> dict[str, str]:
    try:
        with open(path, encoding="utf-8") as f:
            return parse_properties(f.read(), path)
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"config file {path} is not UTF-8 text: {e}") from None


INT_MAX = 0x7FFFFFFF
LONG_MAX = 0x7FFFFFFFFFFFFFFF


def is_host_port(addr: str) -> bool:
    """``host:port`` with a port of 1 to 65535."""
    host, _, port = addr.strip().rpartition(":")
    return bool(host) and port.isdigit() and 1 <= int(port) <= 65535


def json_int(v: object, lo: int = -INT_MAX - 1, hi: int = INT_MAX) -> int | None:
    """A JSON value as a Java int (or long) field of a body reads it: an integer or its digits,
    within [lo, hi]; None for anything else (a bool, a float, null, a list, text)."""
    try:
        n = int(v) if isinstance(v, int | str) and not isinstance(v, bool) else None  # type: ignore[arg-type]
    except ValueError:
        return None
    return n if n is not None and lo <= n <= hi else None


def _coerce(key: str, value: str, typ: Any, long: bool = False) -> Any:
    """``value`` as ``typ``; an int must fit a Java int (``long``: a Java long), as the
    field it sets does in RocketMQ (a value Java cannot parse is an error here too)."""
    try:
        if typ is bool:
            v = value.strip().lower()
            if v not in ("true", "false"):
                raise ValueError("expected true or false")
            return v == "true"
        if typ is int:
            try:
                n = int(value)
            except ValueError:
                raise ValueError("expected a whole number") from None
            top = LONG_MAX if long else INT_MAX
            if not -top - 1 <= n <= top:
                raise ValueError(f"out of range for a Java {'long' if long else 'int'}")
            return n
        if typ is float:
            try:
                return float(value)
            except ValueError:
                raise ValueError("expected a number") from None
        if isinstance(typ, type) and issubclass(typ, enum.Enum):
            return typ[value.strip().upper()]
        return value
    except (ValueError, KeyError) as e:
        if isinstance(typ, type) and issubclass(typ, enum.Enum):
            raise ConfigError(f"bad value for {key}: {value!r}: expected one of {', '.join(typ.__members__)}") from None
        raise ConfigError(f"bad value for {key}: {value!r}: {e}") from None


def apply_properties(configs: list[Any], props: dict[str, str], source: str = "<config>") -> None:
    """Set each key on the first config object that has the field; unknown keys are errors. The
    ignored keys not at RocketMQ 4.9.8's default are named in one warning (``warn_ignored``)."""
    ignored_keys: list[tuple[str, str, str]] = []
    for key, value in props.items():
        for cfg in configs:
            # RocketMQ's own spellings that do not map mechanically (mapedFileSizeCommitLog, …)
            field = field_for_key(type(cfg), key)
            hints = _field_types(type(cfg))
            if field in {f.name for f in dataclasses.fields(cfg)}:
                typ = hints[field]
                if getattr(typ, "__origin__", None) is not None or "|" in str(typ):  # X | None
                    typ = str
                try:
                    converted = _coerce(key, value, typ, field in getattr(type(cfg), "LONG_FIELDS", ()))
                except ConfigError as e:
                    raise ConfigError(f"{source}: {e}") from None
                setattr(cfg, field, converted)
                current = getattr(type(cfg), "LEGACY_KEYS", {}).get(key)
                if current is not None:
                    log.warning("%s: %s is an old spelling that RocketMQ 4.9 ignores (a Java broker on this store "
                                "would use its default): write %s", source, key, current)  # fmt: skip
                break
        else:
            rule = next((r for cfg in configs if (r := getattr(type(cfg), "IGNORED_KEYS", {}).get(key))), None)
            if rule is None:
                raise ConfigError(f"{source}: unknown key {key!r}")
            accepted, reason = rule
            if accepted is not None and value.strip().lower() not in accepted:
                raise ConfigError(f"{source}: {key}={value} is not supported: {reason}")
            if not at_rocketmq_default(key, value):  # a key at its default asks for nothing
                ignored_keys.append((key, value, reason))
    warn_ignored(source, ignored_keys)


def warn_ignored(source: str, ignored_keys: list[tuple[str, str, str]]) -> None:
    """One warning for the (key, value, reason) ignored: one key as ``k=v has no effect in Pumice:
    why``; several on one line, the keys of each reason together."""
    if len(ignored_keys) == 1:
        key, value, reason = ignored_keys[0]
        log.warning("%s: %s=%s has no effect in Pumice: %s", source, key, value, reason)
    elif ignored_keys:
        by_reason: dict[str, list[str]] = {}
        for key, value, reason in ignored_keys:
            by_reason.setdefault(reason, []).append(f"{key}={value}")
        named = "; ".join(f"{', '.join(kvs)} ({reason})" for reason, kvs in by_reason.items())
        log.warning("%s: %d keys have no effect in Pumice: %s", source, len(ignored_keys), named)


def conf_key(cfg: Any, field: str) -> str:
    """The RocketMQ key of a config field (``broker_ip1`` → ``brokerIP1``)."""
    return getattr(type(cfg), "CONF_NAMES", {}).get(field) or snake_to_camel(field)


def describe(cfg: Any) -> dict[str, Any]:
    """RocketMQ key → value (enums by name)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        out[conf_key(cfg, f.name)] = v.name if isinstance(v, enum.Enum) else v
    return out


def to_properties(*configs: Any) -> str:
    """The configs as a properties file that loads back to the same values (``-p``,
    GET_BROKER_CONFIG): RocketMQ key names, booleans as true/false, unset keys left out."""
    lines = []
    for cfg in configs:
        for key, value in describe(cfg).items():
            if value is None:
                continue
            if isinstance(value, bool):
                value = "true" if value else "false"
            lines.append(f"{key}={value}\n")
    return "".join(lines)
