"""DLedgerServer on a real loopback port (a one-node group and a three-node group in this
process, memory stores): the frames it answers (remoting code 200, no extFields, no remark), the
remoteId/group checks, unknown codes unanswered, malformed bodies refused with a remark, and
the local API the broker uses."""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pumice.dledger.dledger_config import DLedgerConfig
from pumice.dledger.dledger_memory_store import DLedgerMemoryStore
from pumice.dledger.dledger_protocol import (
    AppendEntryRequest,
    AppendEntryResponse,
    DLedgerRequestCode,
    GetEntriesRequest,
    GetEntriesResponse,
    HeartBeatRequest,
    HeartBeatResponse,
    MetadataRequest,
    MetadataResponse,
)
from pumice.dledger.dledger_response_code import DLedgerError, DLedgerResponseCode
from pumice.dledger.dledger_server import DLedgerServer
from pumice.dledger.member_state import Role
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_codec import encode_bytes
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_exceptions import RemotingTimeoutError
from pumice.remoting.response_code import ResponseCode
from tests.helpers.ports import free_port
from tests.helpers.waiting import eventually


def _servers(tmp_path: Path, n: int) -> list[DLedgerServer]:
    ports = [free_port() for _ in range(n)]
    peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(ports))
    configs = [DLedgerConfig(group="g", self_id=f"n{i}", peers=peers, store_base_dir=str(tmp_path)) for i in range(n)]
    return [DLedgerServer(c, DLedgerMemoryStore(), host="127.0.0.1") for c in configs]


@pytest.fixture
def solo(tmp_path: Path) -> Iterator[DLedgerServer]:
    (server,) = _servers(tmp_path, 1)
    server.start()
    try:
        eventually(server.is_leader, 10, "a one-node group elects itself")
        yield server
    finally:
        server.shutdown()


def _call(server: DLedgerServer, cmd: RemotingCommand, timeout_s: float = 5.0) -> RemotingCommand:
    async def main() -> RemotingCommand:
        client = RemotingClient()
        try:
            return await client.invoke(f"127.0.0.1:{server.rpc.port}", cmd, timeout_s)
        finally:
            await client.close()

    return asyncio.run(main())


def test_answers_are_remoting_200_with_the_outcome_in_the_body(solo: DLedgerServer) -> None:
    resp = _call(solo, RemotingCommand(code=DLedgerRequestCode.METADATA,
                                       body=MetadataRequest(group="g", remote_id="n0").encode()))  # fmt: skip
    assert resp.code == 200 and resp.ext_fields == {} and resp.remark is None and resp.is_response
    assert b'"extFields"' not in encode_bytes(resp) and b'"remark"' not in encode_bytes(resp)
    meta = MetadataResponse.decode(resp.body)
    assert (meta.code, meta.leader_id, meta.group, meta.term) == (200, "n0", "g", -1)
    assert meta.peers == {"n0": f"127.0.0.1:{solo.rpc.port}"}


@pytest.mark.parametrize(
    "remote,group,code",
    [("n7", "g", DLedgerResponseCode.UNKNOWN_MEMBER), ("n0", "other", DLedgerResponseCode.UNKNOWN_GROUP)],
)
def test_remote_id_and_group_are_checked(solo: DLedgerServer, remote: str, group: str, code: int) -> None:
    term = solo.term  # 0: a lone node's first vote is at term 0, as DLedger's
    beat = HeartBeatRequest(group=group, remote_id=remote, local_id="n1", leader_id="n1", term=5)
    resp = _call(solo, RemotingCommand(code=DLedgerRequestCode.HEART_BEAT, body=beat.encode()))
    answer = HeartBeatResponse.decode(resp.body)
    assert resp.code == 200 and answer.code == code
    assert (answer.group, answer.remote_id, answer.local_id, answer.leader_id, answer.term) == (group, remote, "n1",
                                                                                               "n0", 5)  # fmt: skip
    assert solo.term == term and solo.is_leader()  # nothing acted on


def test_unknown_codes_and_pull_get_no_answer(solo: DLedgerServer) -> None:
    for code in (50099, DLedgerRequestCode.PULL):
        with pytest.raises(RemotingTimeoutError):
            _call(solo, RemotingCommand(code=code, body=b"{}"), timeout_s=0.5)
    assert solo.is_leader()


@pytest.mark.parametrize("body", [b"", b"{not json", b'{"group":"g","remoteId":"n0","beginIndex":"x"}'])
def test_a_malformed_body_is_refused_with_a_remark(solo: DLedgerServer, body: bytes) -> None:
    resp = _call(solo, RemotingCommand(code=DLedgerRequestCode.GET, body=body))
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark and "GetEntriesRequest" in resp.remark
    assert solo.is_leader()


def test_append_and_get_as_a_client(solo: DLedgerServer) -> None:
    req = AppendEntryRequest(group="g", remote_id="n0", body=b"hello")
    resp = AppendEntryResponse.decode(_call(solo, RemotingCommand(code=DLedgerRequestCode.APPEND,
                                                                  body=req.encode())).body)  # fmt: skip
    assert (resp.code, resp.index, resp.pos, resp.term, resp.leader_id) == (200, 0, 0, solo.term, "n0")
    got = GetEntriesResponse.decode(_call(solo, RemotingCommand(code=DLedgerRequestCode.GET,
                                          body=GetEntriesRequest(group="g", remote_id="n0",
                                                                 begin_index=0).encode())).body)  # fmt: skip
    assert [(e.index, e.term, e.body, e.size) for e in got.entries] == [(0, solo.term, b"hello", 53)]
    assert solo.store.committed_index == 0


def test_local_append_api_and_status(tmp_path: Path) -> None:
    servers = _servers(tmp_path, 3)
    roles: list[tuple[str, int, Role]] = []
    for s in servers:
        s.add_role_change_listener(lambda term, role, s=s: roles.append((s.config.self_id, term, role)))
        s.start()
    try:
        leader = eventually(lambda: next((s for s in servers if s.is_leader()), None), 15, "a leader")
        follower = next(s for s in servers if s is not leader)
        with pytest.raises(DLedgerError) as refused:
            follower.append_as_leader([b"x"])
        assert refused.value.code is DLedgerResponseCode.NOT_LEADER
        seen: list[int] = []
        entries, fut = leader.append_as_leader([b"a" * 100, b"b" * 100], hook=lambda e, body: seen.append(e.pos))
        assert [e.index for e in entries] == [0, 1] and seen == [0, 148]
        assert fut.result(10) is DLedgerResponseCode.SUCCESS
        eventually(lambda: all(s.store.committed_index == 1 for s in servers), 10, "followers learn the commit")
        status = leader.status()
        assert status["role"] == "LEADER" and status["committedIndex"] == 1
        assert {m["endIndex"] for m in status["members"].values()} == {1}
        assert (leader.config.self_id, leader.term, Role.LEADER) in roles
        assert all(s.leader_id == leader.config.self_id for s in servers)
        # a leader that loses its followers times appends out after maxWaitAckTimeMs (2.5 s)
        for s in servers:
            if s is not leader:
                s.shutdown()
        started = time.monotonic()
        _, lost = leader.append_as_leader([b"c"])
        outcome = lost.result(10)
        assert outcome in (DLedgerResponseCode.WAIT_QUORUM_ACK_TIMEOUT, DLedgerResponseCode.TERM_CHANGED)
        assert 1.0 < time.monotonic() - started < 8.0
    finally:
        for s in servers:
            s.shutdown()
    assert isinstance(fut, concurrent.futures.Future)


def test_a_brokers_log_refuses_appends_from_the_network(tmp_path: Path) -> None:
    """A broker's log (accept_client_appends=False) answers a client's APPEND UNSUPPORTED and
    writes nothing: its entries must be CommitLog records (RocketMQ would take any body)."""
    port = free_port()
    config = DLedgerConfig(group="g", self_id="n0", peers=f"n0-127.0.0.1:{port}", store_base_dir=str(tmp_path))
    server = DLedgerServer(config, DLedgerMemoryStore(), host="127.0.0.1", accept_client_appends=False)
    server.start()
    try:
        eventually(server.is_leader, 10, "a one-node group elects itself")
        req = AppendEntryRequest(group="g", remote_id="n0", body=b"not a record")
        resp = AppendEntryResponse.decode(_call(server, RemotingCommand(code=DLedgerRequestCode.APPEND,
                                                                        body=req.encode())).body)  # fmt: skip
        assert resp.code == DLedgerResponseCode.UNSUPPORTED
        assert server.store.ledger_end_index == -1
        entries, fut = server.append_as_leader([b"in-process"])  # the broker's own append still works
        assert fut.result(10) is DLedgerResponseCode.SUCCESS and entries[0].index == 0
    finally:
        server.shutdown()
