"""RocketMQ-style ``.conf`` files (Java properties) into typed config dataclasses.

Keys are RocketMQ's camelCase names (``listenPort``, ``brokerClusterName``, …); each maps to
the dataclass field of the same name in snake_case. An unknown key or a value that does not
parse stops start-up with a ``ConfigError`` that names it.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from typing import Any, get_type_hints

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


class ConfigError(ValueError):
    pass


def camel_to_snake(name: str) -> str:
    return _CAMEL.sub("_", name).lower()


def snake_to_camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


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


def _coerce(key: str, value: str, typ: Any) -> Any:
    try:
        if typ is bool:
            v = value.strip().lower()
            if v not in ("true", "false"):
                raise ValueError("expected true or false")
            return v == "true"
        if typ is int:
            return int(value)
        if typ is float:
            return float(value)
        if isinstance(typ, type) and issubclass(typ, enum.Enum):
            return typ[value.strip().upper()]
        return value
    except (ValueError, KeyError) as e:
        choices = (
            f" (one of {', '.join(typ.__members__)})" if isinstance(typ, type) and issubclass(typ, enum.Enum) else ""
        )
        raise ConfigError(f"bad value for {key}: {value!r}{choices}: {e}") from None


def apply_properties(configs: list[Any], props: dict[str, str], source: str = "<config>") -> None:
    """Set each key on the first config object that has the field; unknown keys are errors."""
    for key, value in props.items():
        for cfg in configs:
            # RocketMQ's own spellings that do not map mechanically (mapedFileSizeCommitLog, …)
            field = getattr(type(cfg), "CONF_ALIASES", {}).get(key) or camel_to_snake(key)
            hints = get_type_hints(type(cfg))
            if field in {f.name for f in dataclasses.fields(cfg)}:
                typ = hints[field]
                if getattr(typ, "__origin__", None) is not None or "|" in str(typ):  # X | None
                    typ = str
                setattr(cfg, field, _coerce(key, value, typ))
                break
        else:
            raise ConfigError(f"{source}: unknown key {key!r}")


def describe(cfg: Any) -> dict[str, Any]:
    """RocketMQ key → value, for ``-p``."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cfg):
        v = getattr(cfg, f.name)
        out[snake_to_camel(f.name)] = v.name if isinstance(v, enum.Enum) else v
    return out
