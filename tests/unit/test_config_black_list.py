"""The config black lists (pumice.config_black_list): every path-like key of the config classes
(camelCase or snake_case), a key added later included, is refused by UPDATE_NAMESRV_CONFIG and
UPDATE_BROKER_CONFIG; the name server writes its config file at its start-time configStorePath
only. tests/integration/test_config_black_list.py sends every spelling to real processes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pumice.broker.broker_config import BrokerConfig
from pumice.config import camel_to_snake, parse_properties
from pumice.namesrv.default_request_processor import DefaultRequestProcessor
from pumice.namesrv.kv_config_manager import KVConfigManager
from pumice.namesrv.namesrv_config import NamesrvConfig
from pumice.namesrv.route_info_manager import RouteInfoManager
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from pumice.store.message_store_config import MessageStoreConfig
from tests.helpers.broker import Harness, run
from tests.helpers.config_keys import BROKER_498, NAMESRV_498, path_like_keys
from tests.helpers.fakes import FakeChannel


def namesrv_processor(tmp_path: Path, config: NamesrvConfig | None = None) -> DefaultRequestProcessor:
    config = config or NamesrvConfig(config_store_path=str(tmp_path / "ns" / "namesrv.properties"))
    return DefaultRequestProcessor(RouteInfoManager(), KVConfigManager(str(tmp_path / "kv.json")), config)


def update(proc: DefaultRequestProcessor, body: str) -> RemotingCommand:
    req = RemotingCommand(code=RequestCode.UPDATE_NAMESRV_CONFIG, body=body.encode())
    return proc.update_namesrv_config(FakeChannel(), req)


def test_every_path_like_key_is_refused_by_the_name_server(tmp_path: Path) -> None:
    keys = [*NAMESRV_498, *path_like_keys(NamesrvConfig)]
    assert {"kvConfigPath", "configStorePath", "rocketmqHome", "logDir", "tlsServerCertPath"} <= set(keys)
    proc = namesrv_processor(tmp_path)
    for key in [*keys, *map(camel_to_snake, keys)]:
        r = update(proc, f"{key}={tmp_path / 'elsewhere'}\n")
        assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, f"Can not update config in black list. ({key})")
    assert not (tmp_path / "elsewhere").exists() and not (tmp_path / "ns").exists()


def test_every_path_like_key_is_refused_by_the_broker(tmp_path: Path) -> None:
    keys = [*BROKER_498, *path_like_keys(BrokerConfig, MessageStoreConfig)]
    assert {"storePathRootDir", "storePathCommitLog", "storePathConsumeQueue", "storePathIndex", "storeCheckpoint",
            "abortFile", "rocketmqHome", "logDir", "tlsServerTrustCertPath"} <= set(keys)  # fmt: skip

    async def scenario(h: Harness) -> None:
        before = (h.broker_config.rocketmq_home, h.store_config.store_path_root_dir)
        for key in [*keys, *map(camel_to_snake, keys)]:
            r = await h.call(RequestCode.UPDATE_BROKER_CONFIG, f"{key}={tmp_path / 'elsewhere'}\n".encode())
            assert (r.code, r.remark) == (ResponseCode.NO_PERMISSION, f"Can not update config in black list. ({key})")
        assert (h.broker_config.rocketmq_home, h.store_config.store_path_root_dir) == before
        assert h.proc.config_version.counter == 0  # no update took place

    run(tmp_path, scenario)
    assert not (tmp_path / "elsewhere").exists()


def test_a_path_like_key_added_later_is_black_listed(tmp_path: Path) -> None:
    """The lists are found in the classes: a new text field named like a path is refused at once."""

    @dataclass
    class LaterNamesrvConfig(NamesrvConfig):
        snapshot_dir: str = "/var/snapshots"
        trace_file: str | None = None

    @dataclass
    class LaterBrokerConfig(BrokerConfig):
        dump_path: str = "/var/dumps"

    assert {"snapshotDir", "traceFile"} <= set(path_like_keys(LaterNamesrvConfig))
    proc = namesrv_processor(tmp_path, LaterNamesrvConfig(config_store_path=str(tmp_path / "ns.properties")))
    for body in ("snapshotDir=/tmp/x", "snapshot_dir=/tmp/x", "TraceFile=/tmp/x"):
        assert update(proc, body).code == ResponseCode.NO_PERMISSION, body
    assert proc.config.snapshot_dir == "/var/snapshots"  # type: ignore[attr-defined]
    assert "dumpPath" in LaterBrokerConfig().black_list() and "dump_path" in LaterBrokerConfig().black_list()
    assert "flushConsumerOffsetInterval" not in LaterBrokerConfig().black_list()


def test_the_configured_black_list_is_read_at_start_and_matched_under_any_spelling(tmp_path: Path) -> None:
    config = BrokerConfig(config_black_list="brokerPermission; autoCreateTopicEnable ;")
    black = config.black_list()
    for key in ("brokerPermission", "broker_permission", "BrokerPermission", "autoCreateTopicEnable",
                "configBlackList", "config_black_list", "brokerConfigPath", "rocketmq_home"):  # fmt: skip
        assert key in black, key
    assert "deleteWhen" not in black and "brokerName" not in black
    config.config_black_list = ""  # what the broker refuses was fixed when the list was made
    assert "brokerPermission" in black


def test_the_config_file_is_written_at_its_start_path_only(tmp_path: Path) -> None:
    """Whatever the live config says later, the name server writes only configStorePath of start
    (and its .tmp and .bak), creating no other directory."""
    proc = namesrv_processor(tmp_path)
    own = tmp_path / "ns" / "namesrv.properties"
    proc.config.config_store_path = str(tmp_path / "chosen" / "x.properties")
    for n in range(2):
        r = update(proc, f"brokerChannelExpiredTime={60_000 + n}\n")
        assert r.code == ResponseCode.SUCCESS, r.remark
    assert parse_properties(own.read_text())["brokerChannelExpiredTime"] == "60001"
    assert sorted(p.name for p in own.parent.iterdir()) == ["namesrv.properties", "namesrv.properties.bak"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ns"]
