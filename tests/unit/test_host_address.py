"""The host's address (pumice.common.host_address), RocketMQ 4.9's RemotingUtil.getLocalAddress
rule, over injected interface address lists; and brokerIP1's default from it."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest

from pumice.broker.broker_config import load_broker_config
from pumice.common import host_address
from pumice.common.host_address import interface_addresses, local_address, pick_local_address


@pytest.mark.parametrize(
    ("addresses", "picked"),
    [
        (["127.0.0.1", "::1", "10.1.2.3", "fd00::2"], "10.1.2.3"),  # loopback skipped, IPv4 first
        (["192.168.1.5", "10.1.2.3"], "10.1.2.3"),  # a 192.168 address only when nothing else
        (["192.168.1.5", "192.168.7.9"], "192.168.7.9"),  # then the last of them, as 4.9
        (["172.17.0.1", "10.0.0.2"], "172.17.0.1"),  # the first that is not 127.0 / 192.168
        (["::1", "fe80::1%eth0", "fd00::2"], "[fe80::1]"),  # IPv6 only: the first, in brackets
        (["127.0.0.1", "::1"], None),  # loopback only: nothing (local_address falls back)
        (["not-an-address"], None),
    ],
)
def test_the_pick_follows_rocketmq_4_9(addresses: list[str], picked: str | None) -> None:
    assert pick_local_address(addresses) == picked


def test_the_host_s_own_interfaces_give_an_address_and_loopback_only_falls_back() -> None:
    found = interface_addresses()
    assert "127.0.0.1" in found  # lo is read (and then skipped by the pick)
    assert local_address() == (pick_local_address(found) or local_address())
    with mock.patch.object(host_address, "interface_addresses", return_value=["127.0.0.1"]):
        with mock.patch("socket.gethostbyname", side_effect=OSError):
            assert local_address() == "127.0.0.1"


def load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "broker.conf"
    path.write_text(text, encoding="utf-8")
    return load_broker_config(str(path))


def test_broker_ip1_defaults_to_the_host_s_address_not_loopback(tmp_path: Path) -> None:
    with mock.patch.object(host_address, "interface_addresses", return_value=["127.0.0.1", "10.9.8.7"]):
        broker, _ = load(tmp_path, "listenPort=10911\n")  # listens on 0.0.0.0
        assert broker.listen_host == "0.0.0.0" and broker.broker_ip1 == "10.9.8.7"
        assert broker.broker_addr == "10.9.8.7:10911"
        # bound to one address: reachable only there, so that is what is published
        broker, _ = load(tmp_path, "listenHost=127.0.0.1\n")
        assert broker.broker_ip1 == "127.0.0.1"
        # the file's brokerIP1 wins
        broker, _ = load(tmp_path, "listenHost=127.0.0.1\nbrokerIP1=10.0.0.5\n")
        assert broker.broker_ip1 == "10.0.0.5"
