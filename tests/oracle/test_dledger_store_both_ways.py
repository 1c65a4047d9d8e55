"""DLedger stores both ways (issue 32): a store written by Apache RocketMQ 4.9.7's broker in
DLedger mode (a one-node group, tests/oracle/dledger_peer.py) opened by Pumice's
DefaultMessageStore in DLedger mode, and a store Pumice wrote served by RocketMQ's broker.

* RocketMQ → Pumice: SENDS messages over 4 queues with 1 MiB data files (the log rolls), a
  clean stop; on a copy without RocketMQ's ConsumeQueues, Pumice's store (its DLedger log
  recovered from RocketMQ's files) dispatches every committed entry: every message readable
  by its offset and its msgId, each ConsumeQueue byte for byte RocketMQ's own.
* Pumice → RocketMQ: Pumice's store (a one-node group that elects itself) takes SENDS
  messages and stops; RocketMQ's broker started on that directory serves every one of them
  by its offset msgId (VIEW_MESSAGE_BY_ID) and rebuilds ConsumeQueues equal to Pumice's.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import pytest

from pumice.broker.dledger_replicated_log import DLedgerReplicatedLog
from pumice.client import AsyncMQAdmin, Message, Producer, SendStatus
from pumice.common.message import MessageExtBrokerInner
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from pumice.store import DefaultMessageStore, MessageStoreConfig, PutMessageStatus
from tests.helpers.ports import free_port
from tests.oracle.dledger_peer import JavaDLedgerGroup
from tests.oracle.rocketmq_peer import JavaNamesrv

pytestmark = pytest.mark.timeout(300)

DATA_FILE = 1 << 20
SENDS = 400
TOPIC = "DLedgerBothWays"
HOST = (b"\x7f\x00\x00\x01", 10911)


def body_of(i: int) -> bytes:
    n = 1500 + (i * 7919) % 2500
    return (f"b{i:05d}-".encode() * (n // 7 + 1))[:n]


def store_config(root: Path) -> MessageStoreConfig:
    return MessageStoreConfig(
        store_path_root_dir=str(root), mapped_file_size_commit_log=DATA_FILE, enable_d_leger_commit_log=True,
        d_leger_group="RaftNode00", d_leger_peers=f"n0-127.0.0.1:{free_port()}", d_leger_self_id="n0",
        preallocate_commit_log=False, prefault_commit_log=False,
    )  # fmt: skip


def cq_bytes(root: Path, queues: int = 4) -> dict[int, bytes]:
    """Each queue's ConsumeQueue entries (files joined, the zero tail cut at a whole entry)."""
    out = {}
    for q in range(queues):
        qdir = root / "consumequeue" / TOPIC / str(q)
        raw = b"".join(p.read_bytes() for p in sorted(qdir.iterdir())) if qdir.is_dir() else b""
        n = len(raw.rstrip(b"\0"))
        out[q] = raw[: -(-n // 20) * 20]
    return out


async def wait_master(group: JavaDLedgerGroup, ns: str) -> str:
    async with AsyncMQAdmin(ns) as admin:
        master = await group.wait_master(admin, 90)
        await admin.create_topic(TOPIC, broker_addr=master, read_queue_nums=4, write_queue_nums=4)
        return master


def test_a_rocketmq_dledger_store_opened_by_pumice(tmp_path: Path, peer_classpath: str) -> None:
    ns = JavaNamesrv(tmp_path / "ns", free_port(), classpath=peer_classpath)
    group: JavaDLedgerGroup | None = None
    try:
        conf = f"mappedFileSizeCommitLog={DATA_FILE}\nautoCreateTopicEnable=false\n"
        group = JavaDLedgerGroup(tmp_path / "group", ns.addr, 1, classpath=peer_classpath, extra_conf=conf)
        asyncio.run(asyncio.wait_for(wait_master(group, ns.addr), 120))
        producer = Producer("BothWaysProducer", ns.addr, send_msg_timeout_s=10.0)
        producer.start()
        try:
            sent = []
            for i in range(SENDS):
                r = producer.send(Message(TOPIC, body_of(i)))
                assert r.send_status == SendStatus.SEND_OK, (i, r)
                sent.append((r.offset_msg_id, r.message_queue.queue_id, r.queue_offset, body_of(i)))
        finally:
            producer.shutdown()
        time.sleep(1.5)  # RocketMQ's ConsumeQueue flush (every second)
        assert group.stop_node("n0") == 143, group.describe()
        src = group.root("n0")
        theirs = cq_bytes(src)
        assert sum(len(b) for b in theirs.values()) == 20 * SENDS
    finally:
        if group is not None:
            group.close()
        ns.stop()
    root = tmp_path / "copy"
    shutil.copytree(src / "dledger-n0", root / "dledger-n0")  # the log only: Pumice dispatches it again
    cfg = store_config(root)
    store = DefaultMessageStore(cfg, replicated_log=DLedgerReplicatedLog.from_store_config(cfg, "127.0.0.1"))
    assert store.load()
    store.start()
    try:
        assert store.get_max_phy_offset() > 0
        for msg_id, queue_id, queue_offset, body in sent:
            by_id = store.look_message_by_msg_id(msg_id)
            assert by_id is not None and by_id.body == body and by_id.queue_id == queue_id, msg_id
            assert by_id.queue_offset == queue_offset
        assert store.get_max_offset_in_queue(TOPIC, 0) + store.get_max_offset_in_queue(TOPIC, 1) + \
            store.get_max_offset_in_queue(TOPIC, 2) + store.get_max_offset_in_queue(TOPIC, 3) == SENDS  # fmt: skip
    finally:
        store.shutdown()
    assert cq_bytes(root) == theirs


def test_a_pumice_dledger_store_served_by_rocketmq(tmp_path: Path, peer_classpath: str) -> None:
    group_dir = tmp_path / "group"
    root = group_dir / "n0" / "store"  # where JavaDLedgerGroup's node n0 keeps its store
    cfg = store_config(root)
    log = DLedgerReplicatedLog.from_store_config(cfg, "127.0.0.1")
    store = DefaultMessageStore(cfg, replicated_log=log)
    assert store.load()
    store.start()
    written = []
    try:
        deadline = time.monotonic() + 30
        while not log.is_leader():  # a group of one elects itself
            assert time.monotonic() < deadline, "the one-node group elected no leader"
            time.sleep(0.05)
        store.recover_topic_queue_table_locked()
        for i in range(SENDS):
            m = MessageExtBrokerInner(topic=TOPIC, body=body_of(i), queue_id=i % 4, store_host=HOST, born_host=HOST,
                                      properties={"TAGS": "T", "KEYS": f"k{i}"})  # fmt: skip
            r = store.put_message(m)
            assert r.status is PutMessageStatus.PUT_OK and r.append_message_result is not None, r
            written.append((r.append_message_result.msg_id, body_of(i)))
        deadline = time.monotonic() + 10
        while store.dispatch_behind_bytes() > 0:
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        store.shutdown()
    ours = cq_bytes(root)
    assert sum(len(b) for b in ours.values()) == 20 * SENDS
    shutil.rmtree(root / "consumequeue")  # RocketMQ builds its own from the log
    for name in ("checkpoint", "abort"):
        (root / name).unlink(missing_ok=True)
    ns = JavaNamesrv(tmp_path / "ns", free_port(), classpath=peer_classpath)
    group: JavaDLedgerGroup | None = None
    try:
        group = JavaDLedgerGroup(group_dir, ns.addr, 1, classpath=peer_classpath,
                                 extra_conf=f"mappedFileSizeCommitLog={DATA_FILE}\n")  # fmt: skip
        master = asyncio.run(asyncio.wait_for(wait_master(group, ns.addr), 120))

        async def view_all() -> list[str]:
            client = RemotingClient()
            bad = []
            try:
                for msg_id, body in written:
                    req = RemotingCommand(code=RequestCode.VIEW_MESSAGE_BY_ID,
                                          ext_fields={"offset": int(msg_id[-16:], 16)})  # fmt: skip
                    r = await client.invoke(master, req, timeout_s=10)
                    if r.code != ResponseCode.SUCCESS or body not in bytes(r.body or b""):
                        bad.append(f"{msg_id}: {r.code} {r.remark}")
            finally:
                await client.close()
            return bad

        assert asyncio.run(asyncio.wait_for(view_all(), 120)) == []
        time.sleep(1.5)  # RocketMQ's ConsumeQueue flush (every second)
        assert group.stop_node("n0") == 143, group.describe()
        assert cq_bytes(root) == ours
    finally:
        if group is not None:
            group.close()
        ns.stop()
