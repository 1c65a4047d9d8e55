"""docs/CONFIG.md (issue 21): the generator's output, every key of RocketMQ 4.9.8 in it, and each
key's status as the loader treats the key: honoured keys change a setting, ignored ones are read
with a warning and change nothing, refused values stop start-up naming the key, unknown keys too."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pumice.broker.broker_config import BrokerConfig, load_broker_config
from pumice.config import ConfigError, apply_properties, conf_key, load_properties
from pumice.config_reference import BROKER_CONF, NAMESRV_CONF, build_reference, key_entries, main
from pumice.ignored_key_defaults import at_rocketmq_default
from pumice.namesrv.namesrv_config import NamesrvConfig
from pumice.store.message_store_config import MessageStoreConfig

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "CONFIG.md"
TSV = ROOT / "tests" / "data" / "rocketmq-4.9.8-config-keys.tsv"
CLASSES = {"broker.conf": BROKER_CONF.java_classes, "namesrv.conf": NAMESRV_CONF.java_classes}


def java_keys(classes: tuple[str, ...]) -> dict[str, set[str]]:
    """key → its defaults in RocketMQ 4.9.8's key table, over ``classes``."""
    out: dict[str, set[str]] = {}
    for line in TSV.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            cls, key, _type, default = line.split("\t")
            if cls in classes:
                out.setdefault(key, set()).add(default)
    return out


@dataclasses.dataclass
class Row:
    key: str
    status: str
    pumice_default: str
    java_default: str
    java_class: str
    notes: str


def doc_rows(text: str) -> dict[str, dict[str, Row]]:
    """conf file → key → its row, from the Markdown."""
    out: dict[str, dict[str, Row]] = {}
    section: dict[str, Row] = {}
    for line in text.splitlines():
        if line.startswith("## "):
            section = out.setdefault(line[3:].strip(), {})
        elif line.startswith("| `"):
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            row = Row(*cells)
            row.key = row.key.strip("`")
            assert row.key not in section, f"{row.key} twice"
            section[row.key] = row
    return out


ROWS = doc_rows(DOC.read_text(encoding="utf-8"))


def test_the_doc_is_the_generator_s_output() -> None:
    assert DOC.read_text(encoding="utf-8") == build_reference(), (
        "docs/CONFIG.md is stale: python3 -m pumice.config_reference > docs/CONFIG.md"
    )


def test_main_prints_the_doc(capsys: pytest.CaptureFixture[str]) -> None:
    main([])
    assert capsys.readouterr().out == DOC.read_text(encoding="utf-8")


@pytest.mark.parametrize("conf", ["broker.conf", "namesrv.conf"])
def test_every_key_of_rocketmq_4_9_8_has_its_row_and_its_default(conf: str) -> None:
    rows = ROWS[conf]
    java = java_keys(CLASSES[conf])
    assert set(java) <= set(rows)
    for key, defaults in java.items():
        (default,) = defaults  # a key of two classes has one default in 4.9.8
        shown = "*(none)*" if default == "null" else "*(empty)*" if default == "" else f"`{default}`"
        assert rows[key].java_default == shown, key
        assert rows[key].java_class != "— (not a 4.9.8 key)"
    for key, row in rows.items():
        if key not in java:
            assert (row.java_default, row.java_class) == ("—", "— (not a 4.9.8 key)"), key


@pytest.mark.parametrize(("conf", "classes"), [("broker.conf", (BrokerConfig, MessageStoreConfig)),
                                               ("namesrv.conf", (NamesrvConfig,))])  # fmt: skip
def test_every_field_and_every_table_entry_has_a_row(conf: str, classes: tuple[type, ...]) -> None:
    rows = ROWS[conf]
    for cls in classes:
        cfg = cls()
        for f in dataclasses.fields(cfg):
            key = conf_key(cfg, f.name)
            names = {key, *(k for k, v in getattr(cls, "CONF_ALIASES", {}).items() if v == f.name)}
            assert any(k in rows for k in names), f"{cls.__name__}.{f.name} ({key}) has no row"
        for key, (_accepted, reason) in getattr(cls, "IGNORED_KEYS", {}).items():
            assert key in rows, key
            assert reason in rows[key].notes, key


# --- what the loader does with each key --------------------------------------------------------


@contextlib.contextmanager
def warnings() -> Iterator[list[str]]:
    """The warnings pumice.config logs meanwhile."""
    got: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            got.append(record.getMessage())

    logger = logging.getLogger("pumice.config")
    handler, level = Collect(logging.WARNING), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    try:
        yield got
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def load_namesrv(path: str) -> NamesrvConfig:
    """`pumice namesrv -c`'s loading (cli.namesrv)."""
    config = NamesrvConfig()
    apply_properties([config], load_properties(path), path)
    config.validate()
    return config


def loader(conf: str, tmp_path: Path, text: str) -> Any:
    path = tmp_path / conf
    path.write_text(text, encoding="utf-8")
    return load_broker_config(str(path)) if conf == "broker.conf" else load_namesrv(str(path))


# a broker's settings differ by role (a master's brokerId is always 0): keys are tried on both
BASES = {"broker.conf": ["", "brokerRole=SLAVE\nbrokerId=1\n"], "namesrv.conf": [""]}
# values of every kind a key takes: one of them sets any honoured key to something new and valid
CANDIDATES = ["true", "false", "12340", "6000020", "40", "2", "0.5", "127.0.0.1:10912", "permissive", "probe",
              "SYNC_MASTER", "SYNC_FLUSH", "/tmp/a", "1s 5s"]  # fmt: skip


def observe(conf: str, tmp_path: Path, key: str) -> str:
    """What the loader does with ``key``, whatever its value: "honoured" (a value changes the
    loaded settings, or start-up's checks name the key), "replaced at start" (read without a
    warning, changing nothing), "ignored" (a warning, nothing changed), or the ConfigError."""
    changed = named = silent = warned = False
    for base in BASES[conf]:
        before = loader(conf, tmp_path, base)
        for value in CANDIDATES:
            with warnings() as got:
                try:
                    after = loader(conf, tmp_path, f"{base}{key}={value}\n")
                except ConfigError as e:
                    if "bad value" in str(e):
                        continue
                    if f"{key}={value} is not supported: " in str(e):  # refused by a value check, by name
                        named = True
                        continue
                    return f"error: {e}"
                except ValueError as e:  # a start-up check of the value read
                    named |= key in str(e)
                    continue
            if [w for w in got if "has no effect in Pumice" in w]:
                warned = True
                assert after == before, f"{key}={value} warned it has no effect, but changed a setting"
            elif not got and after == before and at_rocketmq_default(key, value):
                continue  # an ignored key at RocketMQ's default says nothing (issue 31.5)
            else:
                assert not got, got
                silent = True
                changed |= after != before
    if changed or named:
        return "honoured"
    assert silent != warned
    return "replaced at start" if silent else "ignored"


def all_rows() -> list[tuple[str, str]]:
    return [(conf, key) for conf, rows in ROWS.items() for key in rows]


@pytest.mark.parametrize(("conf", "key"), all_rows())
def test_each_key_s_status_is_what_the_loader_does(tmp_path: Path, conf: str, key: str) -> None:
    row = ROWS[conf][key]
    seen = observe(conf, tmp_path, key)
    if row.status.startswith("honoured"):
        assert seen == "honoured", (key, seen)
    elif row.status == "ignored (a warning)":
        assert seen == "ignored", (key, seen)
        assert row.notes.startswith("No effect: ")
    elif row.status == "replaced at start":
        assert seen == "replaced at start", (key, seen)
    elif row.status.startswith("refused: "):
        # some value the doc names is refused, naming the key; the one it accepts is ignored
        cond = row.status.removeprefix("refused: ")
        m = re.fullmatch(rf"`{re.escape(key)}=(.*)`", cond)
        refused = m.group(1) if m else "probe"
        assert m or cond.startswith("any "), cond
        with pytest.raises(ConfigError, match=re.escape(f"{key}={refused} is not supported: ")):
            loader(conf, tmp_path, f"{key}={refused}\n")
        accepted = re.search(r"(`([^`]*)`|An empty value) is accepted, with no effect", row.notes)
        assert accepted, row.notes
        value = accepted.group(2) or ""
        with warnings() as got:
            loader(conf, tmp_path, f"{key}={value}\n")
        if at_rocketmq_default(key, value):  # nothing asked for: nothing said
            assert not got, got
        else:
            assert [w for w in got if f"{key}={value} has no effect in Pumice" in w], got
    else:
        assert row.status == "unknown key → start-up error", row.status
        assert seen == f"error: {conf}: unknown key {key!r}".replace(conf, str(tmp_path / conf), 1)
    # a value refused besides those of the tables: the doc gives the key=value, the loader refuses it
    if row.status.startswith("honoured; refused: "):
        m = re.search(rf"\(`{re.escape(key)}=([^`]*)`\): ([^.;]*)", row.notes)
        assert m, row.notes
        with pytest.raises(ConfigError, match=re.escape(f"{key}={m.group(1)} is not supported: {m.group(2)}")):
            loader(conf, tmp_path, f"{key}={m.group(1)}\n")


def test_a_key_of_4_9_8_pumice_does_not_know_is_listed_unknown_and_refused(tmp_path: Path) -> None:
    """No 4.9.8 key is unknown today: a table with one more shows how such a key is listed."""
    tsv = tmp_path / "keys.tsv"
    tsv.write_text(TSV.read_text(encoding="utf-8") + "BrokerConfig\tnotAPumiceKey\tint\t7\n", encoding="utf-8")
    (entry,) = [e for e in key_entries(BROKER_CONF, tsv) if e.key == "notAPumiceKey"]
    assert entry.status == "unknown key" and entry.pumice_default is None
    row = doc_rows(build_reference(tsv))["broker.conf"]["notAPumiceKey"]
    assert (row.status, row.pumice_default, row.java_default) == ("unknown key → start-up error", "—", "`7`")
    assert observe("broker.conf", tmp_path, "notAPumiceKey").endswith("unknown key 'notAPumiceKey'")
    assert "notAPumiceKey" not in doc_rows(build_reference(tsv))["namesrv.conf"]


# --- spot checks, through load_broker_config ---------------------------------------------------


def test_honoured_keys_show_pumice_s_default_and_set_it(tmp_path: Path) -> None:
    broker = ROWS["broker.conf"]
    assert (broker["listenPort"].status, broker["listenPort"].pumice_default) == ("honoured", "`10911`")
    assert broker["listenPort"].java_default == "`8888`"  # NettyServerConfig's; mqbroker sets 10911
    assert ROWS["namesrv.conf"]["listenPort"].pumice_default == "`9876`"
    assert broker["flushCommitLogTimed"].pumice_default == "`true`" and broker["flushCommitLogTimed"].java_default == (
        "`true`"
    )
    assert broker["pullMessageThreadPoolNums"].pumice_default == "`20` (on 2 CPUs)"  # 16 + 2 × CPUs
    assert broker["storePathRootDir"].pumice_default == "`${user.home}/store`"
    assert '"host:port;host:port"' in broker["namesrvAddr"].notes  # the field's comment
    assert "`flushCommitLogTimedWaitEnable`" in broker["flushCommitLogTimed"].notes  # an alias
    with warnings() as got:
        b, s = loader("broker.conf", tmp_path, "listenPort=10921\nuseTLS=true\nflushCommitTimedWaitEnable=true\n")
    assert (b.listen_port, b.use_tls, s.flush_commit_log_timed, got) == (10921, True, True, [])


def test_an_ignored_key_shows_its_reason_and_the_loader_warns_it(tmp_path: Path) -> None:
    reason = BrokerConfig.IGNORED_KEYS["clientWorkerThreads"][1]
    row = ROWS["broker.conf"]["clientWorkerThreads"]
    assert (row.status, row.notes) == ("ignored (a warning)", f"No effect: {reason}.")
    with warnings() as got:
        b, s = loader("broker.conf", tmp_path, "clientWorkerThreads=16\n")
    assert (b, s) == loader("broker.conf", tmp_path, "")
    assert got == [f"{tmp_path / 'broker.conf'}: clientWorkerThreads=16 has no effect in Pumice: {reason}"]


def test_a_refused_value_shows_refused_and_stops_start_up(tmp_path: Path) -> None:
    assert ROWS["broker.conf"]["enableDLegerCommitLog"].status == "honoured"  # DLedger mode (issue 32)
    assert ROWS["broker.conf"]["filterServerNums"].status == "refused: any value but `0`"
    with pytest.raises(ConfigError, match="filterServerNums=3 is not supported"):
        loader("broker.conf", tmp_path, "filterServerNums=3\n")
    assert ROWS["namesrv.conf"]["useTLS"].status == "refused: `useTLS=true`"
    assert ROWS["broker.conf"]["useTLS"].status == "honoured"  # the broker's own calls
    row = ROWS["broker.conf"]["storePathCommitLog"]
    assert row.status == "honoured; refused: a comma-separated list of directories"
    _, store = loader("broker.conf", tmp_path, f"storePathCommitLog={tmp_path}/cl\n")
    assert store.commit_log_dir == f"{tmp_path}/cl"


def test_a_key_start_up_sets_again_shows_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """haListenPort is read but start-up makes it listenPort + 1: the doc says so, and the loader
    warns when the file asks for another port (RocketMQ says nothing)."""
    row = ROWS["broker.conf"]["haListenPort"]
    assert row.status == "replaced at start" and "listenPort + 1" in row.notes
    with caplog.at_level(logging.WARNING, logger="pumice.broker.broker_config"):
        _, store = loader("broker.conf", tmp_path, "haListenPort=20000\n")
        assert store.ha_listen_port == 10912
        assert [r.getMessage() for r in caplog.records] == [
            f"{tmp_path / 'broker.conf'}: haListenPort=20000 is replaced by 10912: the HA port is always "
            "listenPort + 1, as in RocketMQ"
        ]
        caplog.clear()
        _, store = loader("broker.conf", tmp_path, "listenPort=10921\nha_listen_port=10912\n")  # the default
        assert store.ha_listen_port == 10922
        assert [r.getMessage().split(": ", 1)[1] for r in caplog.records] == [
            "haListenPort=10912 is replaced by 10922: the HA port is always listenPort + 1, as in RocketMQ"
        ]
        caplog.clear()
        _, store = loader("broker.conf", tmp_path, "listenPort=10921\nhaListenPort=10922\n")  # what it becomes
        assert (store.ha_listen_port, caplog.records) == (10922, [])
    assert ROWS["broker.conf"]["brokerId"].status == "honoured"  # a slave's
    broker, _ = loader("broker.conf", tmp_path, "brokerRole=SLAVE\nbrokerId=3\n")
    assert broker.broker_id == 3


def test_the_pool_key_is_named_in_a_warning_where_it_has_no_effect(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """transientStorePoolEnable=true is ignored under SYNC_FLUSH and on a slave (RocketMQ's
    rule, said nothing of there): one warning names why; none where the pool is used."""
    assert "only with ASYNC_FLUSH on a master" in ROWS["broker.conf"]["transientStorePoolEnable"].notes
    with caplog.at_level(logging.WARNING, logger="pumice.broker.broker_config"):
        _, store = loader("broker.conf", tmp_path, "transientStorePoolEnable=true\nflushDiskType=SYNC_FLUSH\n")
        assert store.transient_store_pool_enable and not store.transient_store_pool_in_effect
        assert [r.getMessage() for r in caplog.records] == [
            f"{tmp_path / 'broker.conf'}: transientStorePoolEnable=true is ignored: the pool is used only with "
            "ASYNC_FLUSH on a master (flushDiskType=SYNC_FLUSH, brokerRole=ASYNC_MASTER), as in RocketMQ"
        ]
        caplog.clear()
        loader("broker.conf", tmp_path, "transientStorePoolEnable=true\nbrokerRole=SLAVE\nbrokerId=1\n")
        assert [r.getMessage().split(": ", 1)[1] for r in caplog.records] == [
            "transientStorePoolEnable=true is ignored: the pool is used only with ASYNC_FLUSH on a master "
            "(flushDiskType=ASYNC_FLUSH, brokerRole=SLAVE), as in RocketMQ"
        ]
        caplog.clear()
        _, store = loader("broker.conf", tmp_path, "transientStorePoolEnable=true\n")
        assert store.transient_store_pool_in_effect and caplog.records == []
        _, store = loader("broker.conf", tmp_path, "flushDiskType=SYNC_FLUSH\n")
        assert caplog.records == []


def test_an_old_spelling_is_noted_and_warned(tmp_path: Path) -> None:
    assert "`mapedFileSizeCommitLog` is read with a warning" in ROWS["broker.conf"]["mappedFileSizeCommitLog"].notes
    assert "mapedFileSizeCommitLog" not in ROWS["broker.conf"]
    with warnings() as got:
        _, store = loader("broker.conf", tmp_path, "mapedFileSizeCommitLog=1048576\n")
    assert store.mapped_file_size_commit_log == 1048576 and "mapedFileSizeCommitLog is an old spelling" in got[0]
