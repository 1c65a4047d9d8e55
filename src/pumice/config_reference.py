"""The configuration reference (docs/CONFIG.md), made from the config classes and their key tables.

Every key of broker.conf and namesrv.conf: the ones Pumice reads (its config dataclasses' fields,
under RocketMQ's spelling and their aliases), the ones it accepts and ignores or refuses for some
values (the ``IGNORED_KEYS`` tables), and every other key of RocketMQ 4.9.8
(tests/data/rocketmq-4.9.8-config-keys.tsv), which stops start-up as an unknown key. Nothing here
lists keys by hand: ``key_entries`` resolves each key as ``pumice.config.apply_properties`` does,
and probes the start-up steps that follow it (the broker's role rules, the CommitLog path check).

    python3 -m pumice.config_reference > docs/CONFIG.md
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import enum
import inspect
import io
import os
import re
import sys
import textwrap
import tokenize
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

from pumice.broker.broker_config import BrokerConfig, apply_role, check_store_paths
from pumice.config import ConfigError, apply_properties, camel_to_snake, conf_key, snake_to_camel
from pumice.namesrv.namesrv_config import NamesrvConfig
from pumice.remoting.tls import TlsServerConfig
from pumice.store.message_store_config import BrokerRole, MessageStoreConfig

TSV_NAME = "rocketmq-4.9.8-config-keys.tsv"
# the key list of RocketMQ 4.9.8, in the source tree (an editable install)
DEFAULT_TSV = Path(__file__).resolve().parents[2] / "tests" / "data" / TSV_NAME

HONOURED = "honoured"
IGNORED = "ignored"
REFUSED = "refused"
REPLACED = "replaced at start"
UNKNOWN = "unknown key"
STATUSES = (HONOURED, IGNORED, REFUSED, REPLACED, UNKNOWN)

# host-dependent defaults are given as RocketMQ's table gives them: 2 CPUs, paths under ${user.home}
_CPUS = 2
_HOME = "${user.home}"
_ROCKETMQ_HOME = "${ROCKETMQ_HOME}"
_HOST_ADDRESS = "${hostAddress}"
_PRAGMA = re.compile(r"^(fmt|type|noqa|pragma)\b")
_FIELD_LINE = re.compile(r"^\s*[A-Za-z_]\w*\s*:")


@dataclasses.dataclass(frozen=True)
class JavaKey:
    """A key of RocketMQ 4.9.8: the classes that have it, and each one's default ("null": none)."""

    key: str
    defaults: tuple[tuple[str, str], ...]  # (class, default)
    java_type: str

    @property
    def classes(self) -> tuple[str, ...]:
        return tuple(c for c, _ in self.defaults)


def read_java_keys(path: str | Path, classes: tuple[str, ...]) -> dict[str, JavaKey]:
    """The keys of ``classes`` in RocketMQ 4.9.8's key table (class, key, type, default)."""
    rows: dict[str, list[tuple[str, str, str]]] = {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            cls, key, typ, default = line.split("\t")
            if cls in classes:
                rows.setdefault(key, []).append((cls, typ, default))
    return {
        k: JavaKey(k, tuple((c, d) for c, _, d in sorted(v, key=lambda r: classes.index(r[0]))), v[0][1])
        for k, v in rows.items()
    }


@dataclasses.dataclass(frozen=True)
class ValueCheck:
    """A refusal the loader makes after the tables (``check_store_paths``): ``condition`` in words,
    ``example`` a value it refuses, ``check`` run on the loaded configs."""

    condition: str
    example: str
    check: Callable[[list[Any]], None]


@dataclasses.dataclass(frozen=True)
class ConfFile:
    """A conf file and how its server reads it."""

    name: str
    command: str
    java_command: str
    java_classes: tuple[str, ...]
    make: Callable[[], list[Any]]  # fresh config objects, in apply_properties' order
    # the start-up step after the keys are applied (the broker's role rules), and what it does
    after_load: Callable[[list[Any]], None] | None = None
    after_load_doc: str = ""
    # config states to run after_load from (each broker role)
    contexts: tuple[Callable[[list[Any]], None], ...] = ()
    value_checks: tuple[tuple[str, ValueCheck], ...] = ()


def _role_context(role: BrokerRole) -> Callable[[list[Any]], None]:
    def setup(configs: list[Any]) -> None:
        configs[1].broker_role = role
        if role is BrokerRole.SLAVE:
            configs[0].broker_id = 1

    return setup


BROKER_CONF = ConfFile(
    name="broker.conf",
    command="pumice broker -c broker.conf",
    java_command="mqbroker -c",
    java_classes=("BrokerConfig", "NettyServerConfig", "NettyClientConfig", "MessageStoreConfig"),
    make=lambda: [BrokerConfig(), MessageStoreConfig()],
    after_load=lambda c: apply_role(c[0], c[1]),
    after_load_doc=" ".join((inspect.getdoc(apply_role) or "").split()),
    contexts=tuple(_role_context(r) for r in BrokerRole),
    value_checks=(
        (
            "storePathCommitLog",
            ValueCheck("a comma-separated list of directories", "/data/a,/data/b", lambda c: check_store_paths(c[1])),
        ),
    ),
)
NAMESRV_CONF = ConfFile(
    name="namesrv.conf",
    command="pumice namesrv -c namesrv.conf",
    java_command="mqnamesrv -c",
    java_classes=("NamesrvConfig", "NettyServerConfig"),
    make=lambda: [NamesrvConfig()],
)
CONF_FILES = (BROKER_CONF, NAMESRV_CONF)


@dataclasses.dataclass
class KeyEntry:
    """One row of the reference."""

    key: str
    status: str
    java: JavaKey | None = None
    config_class: type | None = None  # the Pumice config class whose field the key sets
    field: str | None = None
    pumice_default: str | None = None  # rendered; None: not a setting here
    aliases: tuple[str, ...] = ()
    legacy: tuple[tuple[str, str], ...] = ()  # (old spelling, the one to write)
    description: str | None = None
    reason: str | None = None  # ignored / refused: why
    accepted: frozenset[str] | None = None  # ignored keys that take only these values (lower case)
    refused_example: str | None = None  # a value the loader refuses
    refused_condition: str | None = None
    notes: list[str] = dataclasses.field(default_factory=list)


def resolve(configs: list[Any], key: str) -> tuple[Any, str] | None:
    """The config object and field ``key`` sets, as ``apply_properties`` finds them."""
    for cfg in configs:
        name = getattr(type(cfg), "CONF_ALIASES", {}).get(key) or camel_to_snake(key)
        if name in {f.name for f in dataclasses.fields(cfg)}:
            return cfg, name
    return None


def ignored_rule(configs: list[Any], key: str) -> tuple[frozenset[str] | None, str] | None:
    """The ``IGNORED_KEYS`` entry the loader takes for ``key`` (it looks only when no field has it)."""
    return next((r for cfg in configs if (r := getattr(type(cfg), "IGNORED_KEYS", {}).get(key))), None)


@contextlib.contextmanager
def host_independent() -> Iterator[None]:
    """Defaults that depend on the machine made as RocketMQ's key table gives them: 2 CPUs,
    the home directory as ${user.home}, $ROCKETMQ_HOME by name; the host's address (brokerIP1)
    as ${hostAddress}, and no $NAMESRV_ADDR."""

    def expanduser(path: str) -> str:
        return _HOME + path[1:] if path.startswith("~") else path

    with (
        mock.patch("os.cpu_count", return_value=_CPUS),
        mock.patch("os.path.expanduser", expanduser),
        mock.patch.dict(os.environ, {"ROCKETMQ_HOME": _ROCKETMQ_HOME}),
        mock.patch("pumice.common.host_address.local_address", return_value=_HOST_ADDRESS),
    ):
        os.environ.pop("NAMESRV_ADDR", None)  # patch.dict puts it back
        yield


def render_value(v: Any) -> str:
    if v is None:
        return "*(none)*"
    if isinstance(v, bool):
        return f"`{'true' if v else 'false'}`"
    if isinstance(v, enum.Enum):
        return f"`{v.name}`"
    if v == "":
        return "*(empty)*"
    return f"`{v}`"


def render_java_default(java: JavaKey) -> str:
    def one(d: str) -> str:
        return "*(none)*" if d == "null" else render_value(d)

    values = {d for _, d in java.defaults}
    if len(values) == 1:
        return one(java.defaults[0][1])
    return "; ".join(f"{one(d)} ({c})" for c, d in java.defaults)


def field_comments(cls: type) -> dict[str, str]:
    """field → the comment the dataclass source gives it: a trailing comment on its line, or
    the comment lines right above it when no other field follows before the next comment
    (a comment over several fields heads a group, and describes none of them alone)."""
    out: dict[str, str] = {}
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            src = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):
            continue
        lines = src.splitlines()
        comments: dict[int, str] = {}
        for tok in tokenize.generate_tokens(io.StringIO(src).readline):
            if tok.type == tokenize.COMMENT:
                text = tok.string.lstrip("#").strip()
                if text and not _PRAGMA.match(text):
                    comments[tok.start[0]] = text
        tree = ast.parse(src)
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node in body:
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            name = node.target.id
            if name not in names:
                continue
            end = node.end_lineno or node.lineno
            trailing = [
                comments[n]
                for n in range(node.lineno, end + 1)
                if n in comments and not lines[n - 1].lstrip().startswith("#")
            ]
            if trailing:
                out[name] = " ".join(trailing)
                continue
            above: list[str] = []
            n = node.lineno - 1
            while n >= 1 and lines[n - 1].lstrip().startswith("#"):
                if n in comments:
                    above.insert(0, comments[n])
                n -= 1
            following = lines[end] if end < len(lines) else ""
            if above and not _FIELD_LINE.match(following):
                out[name] = " ".join(above)
    return out


def _defining_class(cls: type, name: str) -> type:
    for klass in cls.__mro__:
        if name in getattr(klass, "__annotations__", {}):
            return klass
    return cls


def _probe_value(cfg: Any, name: str) -> str:
    """A value for field ``name`` other than its default, as a conf file would give it."""
    v = getattr(cfg, name)
    if isinstance(v, bool):
        return "false" if v else "true"
    if isinstance(v, enum.Enum):
        members = list(type(v))
        return members[(members.index(v) + 1) % len(members)].name
    if isinstance(v, int):
        return str(v + 1 if v < 2**31 - 1 else v - 1)  # a default of Integer.MAX_VALUE (timerCongestNumEachSlot)
    if isinstance(v, float):
        return str(v / 2)
    return f"{v or ''}probe"


def replaced_at_start(conf: ConfFile, key: str) -> tuple[int, int]:
    """How many of ``conf.contexts`` set the field ``key`` sets again after it is read
    (``after_load``), out of how many ran."""
    if conf.after_load is None:
        return 0, 0
    replaced = ran = 0
    for setup in conf.contexts or (lambda c: None,):
        configs = conf.make()
        setup(configs)
        found = resolve(configs, key)
        assert found is not None
        cfg, name = found
        apply_properties(configs, {key: _probe_value(cfg, name)}, "<probe>")
        read = getattr(cfg, name)
        try:
            conf.after_load(configs)
        except ValueError:
            continue
        ran += 1
        replaced += getattr(cfg, name) != read
    return replaced, ran


def _value_check_reason(conf: ConfFile, key: str, vc: ValueCheck) -> str:
    configs = conf.make()
    apply_properties(configs, {key: vc.example}, "<probe>")
    try:
        vc.check(configs)
    except ConfigError as e:
        return str(e).split(" is not supported: ", 1)[-1]
    raise RuntimeError(f"{key}={vc.example} is not refused by its check")


def _refused_example(accepted: frozenset[str]) -> str:
    return next(v for v in ("true", "1", "x") if v not in accepted)


def _values(values: frozenset[str]) -> str:
    return " or ".join("an empty value" if v == "" else f"`{v}`" for v in sorted(values))


def _refused_condition(key: str, accepted: frozenset[str]) -> str:
    if accepted == {""}:
        return "any non-empty value"
    if accepted < {"true", "false"}:
        (other,) = {"true", "false"} - accepted
        return f"`{key}={other}`"
    return f"any value but {_values(accepted)}"


def key_entries(conf: ConfFile, tsv: str | Path = DEFAULT_TSV) -> list[KeyEntry]:
    """Every key of ``conf``: its fields' keys, the ignored ones, and RocketMQ 4.9.8's; by key."""
    java = read_java_keys(tsv, conf.java_classes)
    configs = conf.make()
    with host_independent():
        shown = conf.make()
    with host_independent(), mock.patch("os.cpu_count", return_value=_CPUS + 1):
        other_host = conf.make()
    entries: dict[str, KeyEntry] = {}

    # the fields: every spelling that reaches one, under the one RocketMQ 4.9.8 has
    for i, cfg in enumerate(configs):
        cls = type(cfg)
        comments = field_comments(cls)
        aliases = getattr(cls, "CONF_ALIASES", {})
        legacy = getattr(cls, "LEGACY_KEYS", {})
        for f in dataclasses.fields(cfg):
            spellings = [conf_key(cfg, f.name), snake_to_camel(f.name), *(k for k, v in aliases.items() if v == f.name)]
            reaching = [k for k in dict.fromkeys(spellings) if resolve(configs, k) == (cfg, f.name)]
            if not reaching:  # no key sets this field (a bug the tests report)
                continue
            in_java = [k for k in reaching if k in java]
            key = in_java[0] if len(in_java) == 1 else reaching[0]
            value, elsewhere = getattr(shown[i], f.name), getattr(other_host[i], f.name)
            default = render_value(value) + (f" (on {_CPUS} CPUs)" if value != elsewhere else "")
            entry = KeyEntry(
                key=key,
                status=HONOURED,
                java=java.get(key),
                config_class=cls,
                field=f.name,
                pumice_default=default,
                aliases=tuple(k for k in reaching if k != key),
                legacy=tuple((k, legacy[k]) for k in reaching if k in legacy),
                description=comments.get(f.name),
            )
            typ = type(value)
            if isinstance(value, enum.Enum):
                entry.notes.append("One of " + ", ".join(f"`{m.name}`" for m in typ) + ".")
            if _defining_class(cls, f.name) is TlsServerConfig:
                entry.notes.append("TLS on the server's ports: see [TLS.md](TLS.md).")
            replaced, ran = replaced_at_start(conf, key)
            if replaced:
                if replaced == ran:
                    entry.status = REPLACED
                    entry.notes.append(
                        f"Read, then set again at start whatever the file says (a warning when it differs): "
                        f"{conf.after_load_doc}"
                    )
                else:
                    entry.notes.append(f"Set again at start in some cases: {conf.after_load_doc}")
            entries[key] = entry

    # the keys Pumice accepts without a field to set
    for cfg in configs:
        for key in getattr(type(cfg), "IGNORED_KEYS", {}):
            if key in entries or resolve(configs, key) is not None:
                continue  # a field takes it: the loader never looks at the table
            rule = ignored_rule(configs, key)
            assert rule is not None
            accepted, reason = rule
            entry = KeyEntry(key=key, status=IGNORED, java=java.get(key), reason=reason, accepted=accepted)
            if accepted is not None:
                entry.status = REFUSED
                entry.refused_example = _refused_example(accepted)
                entry.refused_condition = _refused_condition(key, accepted)
            entries[key] = entry

    for key, vc in conf.value_checks:
        entry = entries[key]
        entry.refused_example, entry.refused_condition = vc.example, vc.condition
        entry.reason = _value_check_reason(conf, key, vc)

    # RocketMQ 4.9.8's keys Pumice does not read at all
    for key, jk in java.items():
        if key not in entries:
            entries[key] = KeyEntry(key=key, status=UNKNOWN, java=jk)
    return sorted(entries.values(), key=lambda e: (e.key.lower(), e.key))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _text(text: str) -> str:
    """Source text for Markdown: ``<`` and ``>`` outside code spans as entities (``<root>`` shows)."""
    parts = text.split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;").replace(">", "&gt;") for i, p in enumerate(parts))


def _status_cell(e: KeyEntry) -> str:
    if e.status == HONOURED:
        return HONOURED + (f"; refused: {e.refused_condition}" if e.refused_condition else "")
    if e.status == IGNORED:
        return "ignored (a warning)"
    if e.status == REFUSED:
        return f"refused: {e.refused_condition}"
    if e.status == REPLACED:
        return REPLACED
    return "unknown key → start-up error"


def _notes_cell(e: KeyEntry) -> str:
    parts: list[str] = []
    if e.description:
        text = e.description[:1].upper() + e.description[1:]
        parts.append(text + "." if text[-1:].isalnum() or text[-1:] in ")\"'" else text)
    if e.status == IGNORED and e.reason:
        parts.append(f"No effect: {e.reason}.")
    if e.status == REFUSED and e.accepted is not None:
        ok = _values(e.accepted)
        parts.append(f"Refused, start-up stops: {e.reason}. {ok[:1].upper() + ok[1:]} is accepted, with no effect.")
    if e.status == HONOURED and e.refused_condition:
        parts.append(f"Refused, start-up stops, for {e.refused_condition} (`{e.key}={e.refused_example}`): {e.reason}.")
    parts.extend(e.notes)
    for old, current in e.legacy:
        parts.append(f"`{old}` is read with a warning: RocketMQ 4.9 ignores that spelling (write `{current}`).")
    other = [a for a in e.aliases if a not in {old for old, _ in e.legacy}]
    if other:
        parts.append("Also read as " + ", ".join(f"`{a}`" for a in other) + ".")
    if e.status == UNKNOWN:
        parts.append("Not read by Pumice: a conf file with it does not start.")
    return _cell(_text(" ".join(parts)))


def render_table(conf: ConfFile, entries: list[KeyEntry]) -> str:
    counts = {s: sum(e.status == s for e in entries) for s in STATUSES}
    in_java = sum(e.java is not None for e in entries)
    classes = ", ".join(conf.java_classes[:-1]) + " and " + conf.java_classes[-1]
    out = [
        f"## {conf.name}",
        "",
        f"Read by `{conf.command}`. RocketMQ 4.9.8's `{conf.java_command}` reads the keys of its {classes} from it.",
        f"{len(entries)} keys, {in_java} of them RocketMQ 4.9.8's: "
        + ", ".join(f"{n} {s}" for s, n in counts.items() if n)
        + ".",
        "",
        "| Key | Status | Pumice default | RocketMQ 4.9.8 default | RocketMQ 4.9.8 class | Notes |",
        "|---|---|---|---|---|---|",
    ]
    for e in entries:
        row = [
            f"`{e.key}`",
            _status_cell(e),
            e.pumice_default if e.pumice_default is not None else "—",
            render_java_default(e.java) if e.java else "—",
            ", ".join(e.java.classes) if e.java else "— (not a 4.9.8 key)",
            _notes_cell(e),
        ]
        out.append("| " + " | ".join(_cell(c) for c in row) + " |")
    return "\n".join(out) + "\n"


def build_reference(tsv: str | Path = DEFAULT_TSV) -> str:
    """docs/CONFIG.md: the intro, then one table per conf file."""
    intro = [
        "# Configuration reference",
        "",
        "`pumice broker -c broker.conf` and `pumice namesrv -c namesrv.conf` read Java properties files "
        "(`key=value` lines, `#` comments) with RocketMQ's camelCase keys. Each key is *honoured* (it sets the "
        "setting), *ignored* (accepted with a warning that says why, unless the value is RocketMQ 4.9.8's "
        "default: the ignored keys a file sets otherwise are named in one warning line), *refused* for the "
        "values shown (start-up "
        "stops, naming the key and why) or *replaced at start* (read, then set by a start-up rule).",
        "Any other key, a misspelt one included, stops start-up as an unknown key (the loader also takes a "
        "setting's key in snake_case, `listen_port` for `listenPort`).",
        "Defaults that depend on the machine are given for 2 CPUs, with the home directory as `${user.home}`; "
        "RocketMQ's column is the value its config class starts with (mqbroker sets listenPort to 10911 "
        "and mqnamesrv to 9876 before reading the file).",
        "Generated from the config classes and their key tables, so do not edit it: regenerate it with "
        "`python3 -m pumice.config_reference > docs/CONFIG.md`.",
        "",
    ]
    tables = [render_table(conf, key_entries(conf, tsv)) for conf in CONF_FILES]
    return "\n".join(intro) + "\n" + "\n".join(tables)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python3 -m pumice.config_reference", description="Print docs/CONFIG.md, the configuration reference."
    )
    parser.add_argument("--rocketmq-keys", default=str(DEFAULT_TSV), help=f"RocketMQ 4.9.8's key table ({TSV_NAME})")
    args = parser.parse_args(argv)
    if not Path(args.rocketmq_keys).is_file():
        parser.error(f"{args.rocketmq_keys} not found (it is in Pumice's source tree: tests/data/{TSV_NAME})")
    sys.stdout.write(build_reference(args.rocketmq_keys))


if __name__ == "__main__":
    main()
