"""Pumice's DLedger store opens a log written by Apache RocketMQ 4.9.7's broker in DLedger
mode (issue 32, point 2: "a DLedger store written by RocketMQ's broker served by Pumice").

A one-node group (``JavaDLedgerGroup``, tests/oracle/dledger_peer.py) with 1 MiB data files
takes SENDS messages from Pumice's Python producer (bodies of 1500..3999 bytes, under the
client's 4 KiB compression mark, so about 1.6 MiB: the log rolls over with blanks), and is
stopped with SIGTERM (its shutdown hook writes the checkpoint). Then, on a copy of
``dledger-n0``:

* the data files are walked here, by the format alone (dledger_entry's header codec, the
  blank rule), into (index, term, pos, size): every file that rolled ends in a blank
  ``-1, rest`` that left less than the next entry + 8 bytes; every send's offset msgId is an
  entry's pos + 48 and the record there carries that offset (the append hook);
* ``DLedgerMmapFileStore`` recovers the same entries: begin, end, term, and ``get(i)``
  equal to the walk, bodies byte for byte;
* the index units it would write (``encode_index_unit``) equal RocketMQ's index file bytes,
  and after recovery its index files hold those same bytes;
* the checkpoint is read (committed index = RocketMQ's, capped at the end), and one written
  by Pumice with the same values is RocketMQ's file byte for byte;
* an entry appended by Pumice after RocketMQ's last one lands where DLedger puts it (right
  after it, with the next index and the same term), and one that does not fit with 8 bytes
  to spare closes the file with a blank and starts the next file;
* reopened, the store recovers RocketMQ's entries and Pumice's.
"""

from __future__ import annotations

import asyncio
import shutil
import struct
from pathlib import Path

import pytest

from pumice.client import AsyncMQAdmin, Message, Producer, SendStatus
from pumice.common.message_decoder import MESSAGE_MAGIC_CODE, decode_message_id
from pumice.dledger.dledger_config import DLedgerConfig
from pumice.dledger.dledger_entry import (
    BLANK_MAGIC_CODE,
    BLANK_SIZE,
    BODY_OFFSET,
    DLedgerEntry,
    decode_header,
    encode_index_unit,
)
from pumice.dledger.dledger_mmap_file_store import DLedgerMmapFileStore
from tests.helpers.ports import free_port
from tests.oracle.dledger_peer import JavaDLedgerGroup
from tests.oracle.rocketmq_peer import JavaNamesrv

pytestmark = pytest.mark.timeout(300)

DATA_FILE = 1 << 20
SENDS = 600
TOPIC = "DLedgerInterop"
PHY_POS_POSITION = 28  # MessageDecoder.PHY_POS_POSITION: the record's PHYSICALOFFSET


def body_of(i: int) -> bytes:
    n = 1500 + (i * 7919) % 2500
    return (f"m{i:05d}-".encode() * (n // 7 + 1))[:n]


def walk(data_dir: Path) -> list[tuple[int, int, int, int]]:
    """(index, term, pos, size) of every entry, read from the files by the format alone."""
    out: list[tuple[int, int, int, int]] = []
    names = sorted(n for n in (p.name for p in data_dir.iterdir()) if n.isdigit())
    for k, name in enumerate(names):
        raw = (data_dir / name).read_bytes()
        assert len(raw) == DATA_FILE, name
        base = int(name)
        rel = 0
        while rel + BLANK_SIZE <= len(raw):
            magic, size = struct.unpack_from(">ii", raw, rel)
            if magic == BLANK_MAGIC_CODE:
                assert size == len(raw) - rel, (name, rel, size)
                if k + 1 < len(names):  # the next file's first entry did not fit with 8 bytes to spare
                    (nxt,) = struct.unpack_from(">i", (data_dir / names[k + 1]).read_bytes(), 4)
                    assert nxt + BLANK_SIZE > size, (name, rel, nxt)
                break
            if size == 0:
                assert k == len(names) - 1, f"{name} ends at {rel} without a blank"
                return out
            magic, size, index, term, pos, _, _, _, body_len = decode_header(raw[rel : rel + BODY_OFFSET])
            assert (magic, pos, body_len + BODY_OFFSET) == (1, base + rel, size), (name, rel)
            assert rel + size + BLANK_SIZE <= len(raw), "an entry left fewer than 8 bytes after it"
            out.append((index, term, pos, size))
            rel += size
    return out


def send_all(ns: str) -> list[int]:
    """SENDS messages; the CommitLog offset (entry pos + 48) of each."""
    producer = Producer("DLedgerInteropProducer", ns, send_msg_timeout_s=10.0)
    producer.start()
    try:
        offsets = []
        for i in range(SENDS):
            r = producer.send(Message(TOPIC, body_of(i)))
            assert r.send_status == SendStatus.SEND_OK, (i, r)
            offsets.append(decode_message_id(r.offset_msg_id)[1])
        return offsets
    finally:
        producer.shutdown()


async def create_topic(group: JavaDLedgerGroup, ns: str) -> None:
    async with AsyncMQAdmin(ns) as admin:
        master = await group.wait_master(admin, 90)
        await admin.create_topic(TOPIC, broker_addr=master, read_queue_nums=4, write_queue_nums=4)
        deadline = asyncio.get_running_loop().time() + 60
        while True:
            try:
                await admin.topic_route(TOPIC)
                return
            except Exception:
                if asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(0.2)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory, peer_classpath: str) -> tuple[Path, list[int]]:
    """RocketMQ's dledger-n0 after SENDS sends and a clean stop, and the sends' offsets."""
    tmp = tmp_path_factory.mktemp("dledger-interop")
    ns = JavaNamesrv(tmp / "ns", free_port(), classpath=peer_classpath)
    group: JavaDLedgerGroup | None = None
    try:
        group = JavaDLedgerGroup(
            tmp / "group",
            ns.addr,
            1,
            extra_conf=f"mappedFileSizeCommitLog={DATA_FILE}\nautoCreateTopicEnable=false\n",
            classpath=peer_classpath,
        )
        asyncio.run(asyncio.wait_for(create_topic(group, ns.addr), 120))
        offsets = send_all(ns.addr)
        assert group.stop_node("n0") == 143, group.describe()
        return group.dledger_dir("n0"), offsets
    finally:
        if group is not None:
            group.close()
        ns.stop()


def copy_store(src: Path, tmp: Path) -> DLedgerMmapFileStore:
    base = tmp / "copy"
    shutil.copytree(src, base / "dledger-n0")
    cfg = DLedgerConfig(
        group="RaftNode00",
        self_id="n0",
        peers="n0-127.0.0.1:40911",
        store_base_dir=str(base),
        mapped_file_size_for_entry_data=DATA_FILE,
    )
    store = DLedgerMmapFileStore(cfg)
    store.load_and_recover()
    return store


def test_rocketmq_log_is_laid_out_as_the_store_expects(written: tuple[Path, list[int]]) -> None:
    src, offsets = written
    entries = walk(src / "data")
    assert len(entries) == SENDS, f"{len(entries)} entries for {SENDS} sends"
    assert [e[0] for e in entries] == list(range(SENDS))
    assert len(list((src / "data").iterdir())) >= 2, "the log never rolled over: raise SENDS"
    by_pos = {pos: (index, size) for index, _, pos, size in entries}
    data = {int(p.name): p.read_bytes() for p in (src / "data").iterdir()}
    for i, off in enumerate(offsets):
        pos = off - BODY_OFFSET
        assert pos in by_pos, (i, off)
        raw = data[pos - pos % DATA_FILE]
        rel = pos % DATA_FILE + BODY_OFFSET
        assert struct.unpack_from(">I", raw, rel + 4)[0] == MESSAGE_MAGIC_CODE
        assert struct.unpack_from(">q", raw, rel + PHY_POS_POSITION)[0] == off  # the hook's pos + 48


def test_store_recovers_every_entry_and_the_same_index_bytes(written: tuple[Path, list[int]], tmp_path: Path) -> None:
    src, _ = written
    entries = walk(src / "data")
    rocketmq_index = b"".join(p.read_bytes() for p in sorted((src / "index").iterdir()) if p.name.isdigit())
    store = copy_store(src, tmp_path)
    try:
        last_index, last_term, last_pos, last_size = entries[-1]
        assert (store.ledger_begin_index, store.ledger_end_index, store.ledger_end_term) == (0, last_index, last_term)
        data = {int(p.name): p.read_bytes() for p in (src / "data").iterdir()}
        for index, term, pos, size in entries:
            e = store.get(index)
            assert (e.index, e.term, e.pos, e.size) == (index, term, pos, size)
            rel = pos % DATA_FILE
            assert e.body == data[pos - rel][rel + BODY_OFFSET : rel + size]
        ours = b"".join(encode_index_unit(1, pos, size, index, term) for index, term, pos, size in entries)
        assert rocketmq_index[: len(ours)] == ours
        assert not rocketmq_index[len(ours) :].strip(b"\0"), "RocketMQ's index holds units past the end"
        after = b"".join(bytes(mf.mmap[: mf.wrote_position]) for mf in store.index_file_queue.mapped_files)
        assert after == ours
        assert store.write_pos == last_pos + last_size
    finally:
        store.shutdown()


def test_checkpoint_read_and_written_as_rocketmq(written: tuple[Path, list[int]], tmp_path: Path) -> None:
    src, _ = written
    raw = (src / "checkpoint").read_bytes()
    props = dict(line.split("=", 1) for line in raw.decode().splitlines() if "=" in line)
    store = copy_store(src, tmp_path)
    try:
        committed = int(props["committedIndex"])
        assert int(props["endIndex"]) == store.ledger_end_index
        assert store.committed_index == min(committed, store.ledger_end_index) and committed >= 0
        e = store.get(store.committed_index)
        assert store.committed_pos == e.pos + e.size
        store.persist_checkpoint()
        assert Path(store.checkpoint_path).read_bytes() == raw
    finally:
        store.shutdown()


def test_appends_after_rocketmqs_last_entry_land_where_dledger_puts_them(
    written: tuple[Path, list[int]], tmp_path: Path
) -> None:
    src, _ = written
    entries = walk(src / "data")
    store = copy_store(src, tmp_path)
    last_index, last_term, last_pos, last_size = entries[-1]
    end = last_pos + last_size
    try:
        (a,) = store.append_as_leader([DLedgerEntry(body=b"pumice after rocketmq")], last_term)
        assert (a.index, a.term, a.pos) == (last_index + 1, last_term, end)
        end = a.pos + a.size
        left = DATA_FILE - end % DATA_FILE
        # fits without the 8 spare bytes, not with them: a blank, then the next file
        (b,) = store.append_as_leader([DLedgerEntry(body=bytes(left - BODY_OFFSET - 4))], last_term)
        assert (b.index, b.pos) == (last_index + 2, end + left)
        assert b.pos % DATA_FILE == 0
    finally:
        store.shutdown()
    base = Path(store.config.store_base_dir)
    blank_file = base / "dledger-n0" / "data" / f"{end - end % DATA_FILE:020d}"
    assert struct.unpack_from(">ii", blank_file.read_bytes(), end % DATA_FILE) == (BLANK_MAGIC_CODE, left)
    again = DLedgerMmapFileStore(store.config)
    again.load_and_recover()
    try:
        assert again.ledger_end_index == last_index + 2
        assert again.get(last_index + 1).body == b"pumice after rocketmq"
        assert again.get(last_index).pos == last_pos
    finally:
        again.shutdown()
