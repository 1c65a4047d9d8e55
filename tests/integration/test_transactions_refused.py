"""A real `pumice broker` with ``rejectTransactionMessage=true`` refuses half messages as RocketMQ
4.9 does and stores nothing; END_TRANSACTION for a half that is not there is refused (answered,
or logged when oneway). Before transactions were built, a half message got SEND_OK, was stored
and never delivered, and its END_TRANSACTION vanished (issue 16). tests/interop runs the
transactions themselves with the Java client."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from pathlib import Path

import pytest

from pumice.common.message_decoder import create_message_id
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clusters import Cluster, running_cluster, send
from tests.helpers.waiting import eventually
from tests.integration.cpp_client import missing_reason, platform_supported, produce

FORBIDDEN = "the broker[127.0.0.1] sending transaction message is forbidden"  # 4.9's remark
# a half message as the Java producer sends it (sendKernelImpl: TRAN_MSG and PGROUP, sysFlag PREPARED)
HALF_PROPS = "TRAN_MSG\x01true\x02PGROUP\x01TxPG\x02UNIQ_KEY\x01AC11000100002A9F00000000000000A0\x02WAIT\x01true"


# each test a fresh pair (it checks that nothing was stored), the broker rejecting half messages
cluster = running_cluster("refusing", "rejectTransactionMessage=true\n", scope="function")


def frame(code: int, ext: dict[str, str], body: bytes = b"", opaque: int = 1, oneway: bool = False) -> bytes:
    """A RocketMQ remoting frame built by hand (JSON header), as a Java client writes it."""
    header = json.dumps({"code": code, "language": "JAVA", "version": 399, "opaque": opaque,
                         "flag": 2 if oneway else 0, "extFields": ext}).encode()  # fmt: skip
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def read_frame(sock: socket.socket) -> dict:
    def exactly(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            assert chunk, "the broker closed the connection"
            buf += chunk
        return buf

    length, header_len = struct.unpack(">ii", exactly(8))
    header = json.loads(exactly(header_len & 0xFFFFFF))
    exactly(length - 4 - (header_len & 0xFFFFFF))
    return header


def end_transaction_fields(state: int) -> dict[str, str]:
    return {"producerGroup": "TxPG", "tranStateTableOffset": "0", "commitLogOffset": "0",
            "commitOrRollback": str(state), "fromTransactionCheck": "false",
            "msgId": "7F00000100002A9F0000000000000000",
            "transactionId": "AC11000100002A9F00000000000000A0"}  # fmt: skip


def broker_log(cluster: Cluster) -> str:
    return "".join(cluster.broker.output_lines)  # type: ignore[attr-defined]


def plain_send_offset(cluster: Cluster) -> int:
    """Send one plain message; the commit log offset it was stored at (0: nothing before it)."""

    async def go() -> int:
        c = RemotingClient()
        try:
            r = await c.invoke(cluster.br, send("PlainTopic", b"plain", "p1"))
            assert r.code == ResponseCode.SUCCESS, r.remark
            msg_id = r.ext_fields["msgId"]
        finally:
            await c.close()
        for offset in range(0, 1 << 20):
            if create_message_id((b"\x7f\x00\x00\x01", cluster.broker_port), offset) == msg_id:
                return offset
        raise AssertionError(f"msgId {msg_id} is not this broker's")

    return asyncio.run(asyncio.wait_for(go(), 30))


def test_half_message_and_end_transaction_over_a_raw_socket(cluster: Cluster) -> None:
    with socket.create_connection(("127.0.0.1", cluster.broker_port), timeout=10) as sock:
        # SEND_MESSAGE_V2 of a half message, then a oneway END_TRANSACTION COMMIT for it, as the
        # Java TransactionMQProducer does; then one END_TRANSACTION that waits for its answer
        half = {"a": "TxPG", "b": "TxTopic", "c": "TBW102", "d": "4", "e": "0", "f": "4", "g": "1700000000000",
                "h": "0", "i": HALF_PROPS, "j": "0", "k": "false", "m": "false"}  # fmt: skip
        sock.sendall(frame(310, half, b"half body", opaque=1))
        r = read_frame(sock)
        assert (r["code"], r["opaque"], r.get("remark")) == (ResponseCode.NO_PERMISSION, 1, FORBIDDEN)
        for state in (8, 12, 8):
            sock.sendall(frame(37, end_transaction_fields(state), opaque=10 + state, oneway=True))
        sock.sendall(frame(37, end_transaction_fields(8), opaque=2))
        r = read_frame(sock)  # the oneway requests get no answer: the next frame is this one's
        assert (r["code"], r["opaque"], r["remark"]) == (
            ResponseCode.SYSTEM_ERROR, 2, "Find prepared transaction message failed"
        )  # fmt: skip
        # a batch carrying the transaction type: MESSAGE_ILLEGAL, as 4.9's CommitLog answers it
        body = struct.pack(">iiiii", 20 + 1 + 2, 0, 0, 0, 1) + b"x" + struct.pack(">h", 0)
        sock.sendall(frame(320, {**half, "i": "", "f": "4"}, body, opaque=3))
        r = read_frame(sock)
        assert (r["code"], r["opaque"]) == (ResponseCode.MESSAGE_ILLEGAL, 3)
        assert "batch message cannot be transactional" in r["remark"]

    # the oneway END_TRANSACTIONs were not dropped silently: a WARN line for each names it
    warned = eventually(
        lambda: [ln for ln in broker_log(cluster).splitlines() if "not done" in ln and "TxPG" in ln] or None,
        what="the WARN lines",
    )
    assert all(" WARNING " in ln and "Find prepared transaction message failed" in ln for ln in warned), warned
    # nothing was stored for any of it: the next plain message is the commit log's first
    assert plain_send_offset(cluster) == 0


@pytest.mark.skipif(not platform_supported(), reason="the rocketmq wheel is x86_64 Linux only")
def test_cpp_client_half_message_is_refused(cluster: Cluster, tmp_path: Path) -> None:
    """The C++ client (PyPI rocketmq 0.4.4) has no transaction producer in its C API, but its
    sendKernelImpl turns a TRAN_MSG "true" property into a PREPARED sysFlag, as a half message."""
    reason = missing_reason()
    if reason:
        pytest.fail(f"the C++ client cannot run: {reason}")
    sent = produce(cluster.ns, "CppTxTopic", "CppTxPG", 2, tmp_path / "p", properties={"TRAN_MSG": "true"},
                   deadline_s=60)  # fmt: skip
    events = sent.of("sent")
    assert len(events) == 2 and not any(e["ok"] for e in events), sent.describe()
    # librocketmq retries, then throws "No route info of this topic" whatever the broker said;
    # the broker's answer is in its log: code 16 (NO_PERMISSION) and the remark
    log = sent.log_text()
    assert f"processSendResponse error remark:{FORBIDDEN}, error code:16" in log, sent.describe()
    assert plain_send_offset(cluster) == 0
