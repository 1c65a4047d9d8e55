"""pumice.proxy's pure parts: rmq-proxy.json (5.3.3's keys and defaults, bad values refused,
unknown keys accepted and named), the route's queue permissions, Guava's consistentHash and
the POP answer's offset info."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from pumice.common.perm_name import PERM_READ, PERM_WRITE
from pumice.common.route_data import QueueData
from pumice.proxy.consumer_activity import parse_info, real_topic, topic_type
from pumice.proxy.proto import domain_pb2 as pb
from pumice.proxy.proxy_config import ProxyConfig, ProxyConfigError, config_path, load_proxy_config
from pumice.proxy.route_activity import queues_of
from pumice.proxy.send_activity import consistent_hash


def test_defaults_are_5_3_3s() -> None:
    c = ProxyConfig()
    assert (c.grpc_server_port, c.max_message_size, c.min_invisible_time_mills_for_recv) == (8081, 4194304, 10_000)
    assert (c.grpc_client_consumer_long_polling_batch_size, c.rocket_mq_cluster_name) == (32, "DefaultCluster")


def test_the_file_is_found_as_5_3_3_looks(tmp_path: Path) -> None:
    assert config_path({"RMQ_PROXY_HOME": "/a", "ROCKETMQ_HOME": "/b"}) == "/a/conf/rmq-proxy.json"
    assert config_path({"ROCKETMQ_HOME": "/b"}) == "/b/conf/rmq-proxy.json"
    assert config_path({}) is None
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "rmq-proxy.json").write_text(
        json.dumps({"grpcServerPort": "9091", "enableTopicMessageTypeCheck": False})
    )
    c = load_proxy_config(env={"ROCKETMQ_HOME": str(tmp_path)})
    assert (c.grpc_server_port, c.enable_topic_message_type_check) == (9091, False)


@pytest.mark.parametrize(("text", "named"), [
    ('{"grpcServerPort": 70000}', "grpcServerPort must be an integer from 0 to 65535"),
    ('{"maxMessageSize": "big"}', "maxMessageSize must be an integer"),
    ('{"enableMessageBodyEmptyCheck": 3}', "enableMessageBodyEmptyCheck must be true or false"),
    ('[1, 2]', "not a JSON object"),
    ('{"grpcServerPort": ', "cannot read"),
])  # fmt: skip
def test_bad_values_are_refused_naming_the_key(tmp_path: Path, text: str, named: str) -> None:
    path = tmp_path / "rmq-proxy.json"
    path.write_text(text)
    with pytest.raises(ProxyConfigError, match=named):
        load_proxy_config(str(path))


def test_unknown_keys_are_accepted_and_named(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "rmq-proxy.json"
    path.write_text('{"proxyMode": "local", "grpcBossLoopNum": 1}')
    with caplog.at_level(logging.WARNING):
        load_proxy_config(str(path))
    assert "grpcBossLoopNum, proxyMode" in caplog.text


def test_queue_permissions_as_5_3_3_numbers_them() -> None:
    rw = PERM_READ | PERM_WRITE
    assert queues_of(QueueData("b", 2, 4, rw)) == [pb.WRITE, pb.WRITE, pb.READ_WRITE, pb.READ_WRITE]
    assert queues_of(QueueData("b", 3, 1, rw)) == [pb.READ, pb.READ, pb.READ_WRITE]
    assert queues_of(QueueData("b", 2, 2, PERM_READ)) == [pb.READ, pb.READ]
    assert queues_of(QueueData("b", 0, 0, 0)) == [pb.NONE]


def test_consistent_hash_moves_keys_only_to_a_new_bucket() -> None:
    keys = range(-5000, 5000, 7)
    for n in range(1, 12):
        before = [consistent_hash(k, n) for k in keys]
        after = [consistent_hash(k, n + 1) for k in keys]
        assert all(0 <= b < n for b in before)
        assert all(a == b or a == n for a, b in zip(after, before, strict=True))
        assert len(set(after)) == n + 1  # every bucket used


def test_pop_offset_info_and_topic_types() -> None:
    assert parse_info("0 3 17;1 0 4") == {"0@3": "17", "1@0": "4"}
    assert parse_info(None) == {}
    assert (topic_type("T"), topic_type("%RETRY%g_T"), topic_type("%RETRY%g+T")) == ("0", "1", "2")
    assert (real_topic("T", "g", "1"), real_topic("T", "g", "2"), real_topic("T", "g", "0")) == (
        "%RETRY%g_T",
        "%RETRY%g+T",
        "T",
    )
