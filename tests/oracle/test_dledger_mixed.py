"""A DLedger group of two Apache RocketMQ 4.9.7 brokers (``enableDLegerCommitLog=true``,
dledger 0.3.1.2) and one Pumice node (``python -m pumice.dledger``, file store) on 127.0.0.1.

The two RocketMQ nodes start first and elect one of them; the Pumice node joins as a FOLLOWER
(with ``preferredLeaderId=n0;n1``: the RocketMQ nodes).
Messages sent to the RocketMQ leader are replicated to the Pumice node, whose data file is then
byte-identical to the leader's up to the ledger end. The RocketMQ leader is SIGKILLed: the
remaining RocketMQ node and the Pumice node elect a new leader between them (either may win,
each needing the other's ACCEPT); if Pumice wins, it hands leadership to the RocketMQ node
(LEADERSHIP_TRANSFER, and a vote Pumice accepts); sends continue through the RocketMQ node
and the Pumice node's data file stays byte-identical to its."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pumice.dledger.dledger_protocol import DLedgerRequestCode, MetadataRequest, MetadataResponse
from tests.helpers.clusters import call, send
from tests.helpers.dledger_group import GROUP, DLedgerNode, dledger_call
from tests.helpers.ports import free_port
from tests.helpers.waiting import eventually
from tests.oracle.dledger_peer import JavaDLedgerGroup, first_data_file, ledger_end
from tests.oracle.rocketmq_peer import JavaBroker, JavaNamesrv, stop_all

TOPIC = "DLedgerMixedTopic"


def _data(root: Path, node_id: str) -> bytes:
    return first_data_file(root / f"dledger-{node_id}")  # the test writes far less than the first (1 GiB) file


class Member:
    """A node of the mixed group: its DLedger port, its store root, its broker if a RocketMQ one."""

    def __init__(self, group: JavaDLedgerGroup, node_id: str) -> None:
        self.node_id = node_id
        self.root = group.root(node_id)
        self.node = DLedgerNode(node_id, group.dledger_ports[group.ids.index(node_id)], self.root)
        self.broker: JavaBroker | None = None


def _leader_of(member: Member) -> str | None:
    try:
        meta = dledger_call(member.node, DLedgerRequestCode.METADATA,
                            MetadataRequest(group=GROUP, remote_id=member.node_id), MetadataResponse, 2.0)  # fmt: skip
    except Exception:
        return None
    return meta.leader_id


@pytest.fixture
def mixed(tmp_path: Path, peer_classpath: str) -> Iterator[dict[str, Member]]:
    ns = JavaNamesrv(tmp_path / "namesrv", free_port(), classpath=peer_classpath)
    group = JavaDLedgerGroup(tmp_path, ns.addr, 3, group=GROUP, extra_conf="autoCreateTopicEnable=true\n",
                             classpath=peer_classpath, start=False)  # fmt: skip
    members = {i: Member(group, i) for i in group.ids}
    try:
        for i in ("n0", "n1"):  # RocketMQ's nodes; n2 is Pumice's
            members[i].broker = group.start_node(i)
        eventually(lambda: _leader_of(members["n0"]) in ("n0", "n1") and _leader_of(members["n0"]) == _leader_of(
            members["n1"]), 60, "the two RocketMQ nodes elect a leader")  # fmt: skip
        members["n2"].root.mkdir(parents=True, exist_ok=True)
        members["n2"].node.start(group.peers, "file", ["--preferred-leader", "n0;n1"])
        yield members
    finally:
        members["n2"].node.kill()
        for i in group.running():
            group.kill_node(i)
        stop_all([ns])


def _send_all(broker: JavaBroker, tag: str, n: int) -> None:
    for i in range(n):
        (resp,) = call(broker.addr, None, send(TOPIC, f"{tag}-{i}".encode().ljust(64, b"."), f"{tag}{i}", i % 4))
        assert resp.code == 0, (tag, i, resp.code, resp.remark)


def test_pumice_follows_rocketmq_and_elects_with_it(mixed: dict[str, Member]) -> None:
    members = mixed
    pumice = members["n2"]
    leader_id = _leader_of(members["n0"])
    assert leader_id in ("n0", "n1")
    leader = members[leader_id]
    other = members["n1" if leader_id == "n0" else "n0"]
    assert leader.broker is not None and other.broker is not None
    eventually(lambda: _leader_of(pumice) == leader_id, 30, "the Pumice node follows the RocketMQ leader")
    _send_all(leader.broker, "a", 20)

    def same(a: Member, b: Member) -> bool:
        ref = _data(a.root, a.node_id)
        last, end = ledger_end(ref)
        return last >= 19 and _data(b.root, b.node_id)[:end] == ref[:end]

    eventually(lambda: same(leader, pumice), 30, "the Pumice node's data file equals the RocketMQ leader's")
    eventually(lambda: same(leader, other), 30, "the RocketMQ follower's too")

    # the RocketMQ leader dies: the other RocketMQ node and the Pumice node elect between them
    os.kill(leader.broker.pid, signal.SIGKILL)
    leader.broker.proc.wait(30)
    killed_at = time.monotonic()
    new = eventually(lambda: (lambda a, b: a if a and a == b and a != leader_id else None)(
        _leader_of(other), _leader_of(pumice)), 40, "a new leader both survivors name")  # fmt: skip
    print(f"new leader {new} {time.monotonic() - killed_at:.1f} s after SIGKILL of {leader_id}")
    pumice_log = "".join(pumice.node.lines)
    if new == "n2":
        assert "PASSED" in pumice_log  # Pumice counted the RocketMQ node's ACCEPT
        # not a preferred leader (--preferred-leader n0;n1): it hands leadership to the RocketMQ
        # node (LEADERSHIP_TRANSFER), which takes it with a vote Pumice must accept
        eventually(lambda: _leader_of(other) == other.node_id and _leader_of(pumice) == other.node_id, 30,
                   "leadership handed to the RocketMQ node")  # fmt: skip
        assert "leadership transfer to" in "".join(pumice.node.lines)
    assert f"voted for {other.node_id}" in "".join(pumice.node.lines)  # Pumice's ACCEPT made it leader
    eventually(lambda: _send_ok(other.broker), 60, "the new RocketMQ leader accepts sends")
    _send_all(other.broker, "b", 10)

    def caught_up() -> bool:
        return same(other, pumice) and ledger_end(_data(other.root, other.node_id))[0] >= 30

    eventually(caught_up, 30, "the Pumice node follows the new RocketMQ leader")


def _send_ok(broker: JavaBroker | None) -> bool:
    assert broker is not None
    (resp,) = call(broker.addr, None, send(TOPIC, b"probe".ljust(64, b"."), "probe", 0))
    return resp.code == 0
