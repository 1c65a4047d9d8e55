"""The official Node.js v5 client (rocketmq-client-nodejs 1.0.8, tests/peers5-node) against Pumice's
gRPC endpoint (`pumice broker --enable-proxy`) and against RocketMQ 5.3.3's proxy in LOCAL mode,
the same scenarios and exact counts for both (``v5_server``, once per server per module):

- Producer: normal sends with a tag, keys and a user property; FIFO sends; transactions committed
  (delivered), rolled back (never delivered) and left open (the orphan checked back through
  Telemetry, answered COMMIT, then delivered); a delay message (delivered once due, not before).
- SimpleConsumer: receives and acks exactly what was sent, every message's body digest checked by
  the client (``corrupted`` false); a message group of a FIFO group in order, the next only after
  the ack; an unacked message back after its invisible time with attempt 2;
  ChangeInvisibleDuration shortening it; past max attempts the message in ``%DLQ%<group>``; a tag
  filter and an SQL92 filter.
- PushConsumer: N messages consumed exactly (the client discards a message whose digest does not
  match, so this fails on a server that sends a digest the client cannot check); the listener's
  first failures redelivered; a FIFO group's messages consumed in order, a failed one forwarded
  to the DLQ by the client (its one attempt: see the test).

RocketMQ 5.3.3 is the worker's shared one (``rocketmq5_shared``: SHARED_BROKER_CONF and
SHARED_PROXY_CONF, transactions checked back after 1 s, SQL92 on, invisible times from 2 s); the
Pumice broker runs with the same settings. The timed scenarios (redelivery, invisible time, DLQ,
delivery time) run against 5.3.3 with PUMICE_ORACLE_ALL=1 only, as in test_grpc_consumers.py.

Without a server: the wrapper names the install command when the client is missing, and the
driver ends with an ``error`` event on an unserved endpoint or a bad argument, or by its watchdog."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pumice.common.mix_all import DLQ_GROUP_TOPIC_PREFIX
from tests.helpers import pumice5, v5_node
from tests.helpers.ports import free_port
from tests.helpers.pumice5 import PumiceV5
from tests.helpers.rocketmq5 import (
    SHARED_BROKER_CONF,
    SHARED_PROXY_CONF,
    _conf_value,
    serve,
    timed_duplicate_on_the_reference,
)
from tests.oracle5.test_grpc_consumers import _pull_all

# name -> how the module starts it (stopped after); None: the worker's shared RocketMQ 5.3.3
SERVERS: dict[str, Any] = {
    "rocketmq5": None,
    "pumice": lambda root: PumiceV5(
        root, "".join(f"{k}={_conf_value(v)}\n" for k, v in SHARED_BROKER_CONF.items()), dict(SHARED_PROXY_CONF)
    ),
}


@pytest.fixture(scope="module")
def node_client() -> Path:
    """The client's node_modules (fails with the install command when missing)."""
    return v5_node.node_modules()


@pytest.fixture(scope="module", params=sorted(SERVERS))
def v5_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, node_client: Path
              ) -> Iterator[Any]:  # fmt: skip
    """Pumice (`pumice broker --enable-proxy`, started for the module) and RocketMQ 5.3.3."""
    yield from serve(request, tmp_path_factory, SERVERS)


def _setup(server: Any, topic: str, group: str | None = None, kind: str = "NORMAL", max_retries: int = 16) -> None:
    """The topic and group over remoting, as mqadmin 5 sends them, on either server: an mqadmin JVM
    per call would cost 5.3.3's side about two minutes here."""
    pumice5.create_topic(server.broker_addr, server.namesrv, topic, queues=2, message_type=kind)
    if group is not None:
        pumice5.create_group(server.broker_addr, group, fifo=kind == "FIFO", max_retries=max_retries)


def _produce(server: Any, home: Path, topic: str, *args: str, timeout_s: float = 60) -> v5_node.V5Run:
    return v5_node.run("produce", server.grpc_endpoint, "--topic", topic, *args, home=home, timeout_s=timeout_s).ok()


def _simple(server: Any, home: Path, topic: str, group: str, *args: str, timeout_s: float = 60) -> v5_node.V5Run:
    run = v5_node.run("simple-consume", server.grpc_endpoint, "--topic", topic, "--group", group, "--await-s", "3",
                      *args, home=home, timeout_s=timeout_s).ok()  # fmt: skip
    assert not [e for e in run.of("received") if e["corrupted"]], run.describe()  # every digest checks out
    return run


def _push(server: Any, home: Path, topic: str, group: str, *args: str, timeout_s: float = 60) -> v5_node.V5Run:
    return v5_node.run("push-consume", server.grpc_endpoint, "--topic", topic, "--group", group, *args, home=home,
                       timeout_s=timeout_s).ok()  # fmt: skip


def test_normal_sends_received_and_acked(v5_server: Any, tmp_path: Path) -> None:
    _setup(v5_server, "N5Normal", "N5NormalGroup")
    sent = _produce(v5_server, tmp_path / "p", "N5Normal", "--count", "5", "--body-prefix", "n-", "--tag", "TagA",
                    "--keys", "k1", "--keys", "k2", "--property", "color=blue").of("sent")  # fmt: skip
    assert [e["body"] for e in sent] == [f"n-{i}" for i in range(5)]
    assert len({e["message_id"] for e in sent}) == 5
    run = _simple(v5_server, tmp_path / "c", "N5Normal", "N5NormalGroup", "--count", "5", "--invisible-s", "15",
                  "--linger-s", "2", "--max-s", "30")  # fmt: skip
    received = run.of("received")
    assert sorted((e["message_id"], e["body"]) for e in received) == sorted((e["message_id"], e["body"]) for e in sent)
    assert {(e["tag"], tuple(e["keys"]), e["properties"].get("color"), e["attempt"]) for e in received} == {
        ("TagA", ("k1", "k2"), "blue", 1)
    }
    assert len(run.of("acked")) == 5 and not run.of("ack_error")


def test_fifo_message_groups_in_order(v5_server: Any, tmp_path: Path) -> None:
    """Two message groups of a FIFO group, received one message at a time and acked: each group
    in send order."""
    _setup(v5_server, "N5Fifo", "N5FifoGroup", kind="FIFO")
    for g in ("g1", "g2"):
        sent = _produce(v5_server, tmp_path / g, "N5Fifo", "--count", "3", "--body-prefix", f"{g}-",
                        "--message-group", g).of("sent")  # fmt: skip
        assert [e["message_group"] for e in sent] == [g] * 3
    run = _simple(v5_server, tmp_path / "c", "N5Fifo", "N5FifoGroup", "--count", "6", "--batch", "1",
                  "--invisible-s", "10", "--linger-s", "2", "--max-s", "40")  # fmt: skip
    received = run.of("received")
    assert len(received) == 6 and len(run.of("acked")) == 6
    for g in ("g1", "g2"):
        assert [e["body"] for e in received if e["message_group"] == g] == [f"{g}-{i}" for i in range(3)]


def test_transactions_commit_delivered_rollback_not(v5_server: Any, tmp_path: Path) -> None:
    _setup(v5_server, "N5Tx", "N5TxGroup", kind="TRANSACTION")
    committed = _produce(v5_server, tmp_path / "c", "N5Tx", "--count", "2", "--body-prefix", "commit-",
                         "--transaction", "commit")  # fmt: skip
    rolled_back = _produce(v5_server, tmp_path / "r", "N5Tx", "--count", "2", "--body-prefix", "rollback-",
                           "--transaction", "rollback", "--check-answer", "rollback")  # fmt: skip
    assert all(e["transaction_id"] for e in committed.of("sent") + rolled_back.of("sent"))
    assert [e["message_id"] for e in committed.of("committed")] == [e["message_id"] for e in committed.of("sent")]
    assert [e["message_id"] for e in rolled_back.of("rolled_back")] == [e["message_id"] for e in rolled_back.of("sent")]
    run = _simple(v5_server, tmp_path / "s", "N5Tx", "N5TxGroup", "--count", "2", "--invisible-s", "10",
                  "--linger-s", "4", "--max-s", "30")  # fmt: skip
    received = run.of("received")
    assert sorted(e["body"] for e in received) == ["commit-0", "commit-1"], "\n".join(
        [committed.describe(), rolled_back.describe(), run.describe()]
    )


def test_orphaned_transaction_checked_back_then_delivered(v5_server: Any, tmp_path: Path) -> None:
    _setup(v5_server, "N5TxOrphan", "N5TxOrphanGroup", kind="TRANSACTION")
    run = _produce(v5_server, tmp_path / "p", "N5TxOrphan", "--count", "1", "--body-prefix", "orphan-",
                   "--transaction", "unknown", "--check-answer", "commit", "--await-checks", "1",
                   "--check-wait-s", "60", "--linger-s", "1", timeout_s=90)  # fmt: skip
    (sent,) = run.of("sent")
    checked = run.of("checked")
    assert checked and {e["message_id"] for e in checked} == {sent["message_id"]}
    got = _simple(v5_server, tmp_path / "c", "N5TxOrphan", "N5TxOrphanGroup", "--count", "1", "--invisible-s", "10",
                  "--linger-s", "2", "--max-s", "30")  # fmt: skip
    received = got.of("received")
    assert {(e["message_id"], e["body"]) for e in received} == {(sent["message_id"], "orphan-0")}
    # each check answered COMMIT may commit it once more: 5.3.3 writes its op messages in batches
    # (transactionOpBatchInterval, 3 s) and checks an open half again after transactionTimeOut (1 s
    # here), so a second check-back may come and the message be delivered twice (seen under load)
    assert 1 <= len(received) <= len(checked), (run.describe(), got.describe())


def test_delay_message_delivered_once_due(v5_server: Any, tmp_path: Path) -> None:
    timed_duplicate_on_the_reference(v5_server)
    _setup(v5_server, "N5Delay", "N5DelayGroup", kind="DELAY")
    (sent,) = _produce(v5_server, tmp_path / "p", "N5Delay", "--count", "1", "--body-prefix", "t-",
                       "--delay-s", "4").of("sent")  # fmt: skip
    run = _simple(v5_server, tmp_path / "c", "N5Delay", "N5DelayGroup", "--count", "1", "--invisible-s", "10",
                  "--linger-s", "1", "--max-s", "30")  # fmt: skip
    (got,) = run.of("received")
    due_ms = sent["delivery_timestamp"]  # ms, as the Node client sends it
    print(f"delay: received {got['t'] * 1000 - due_ms:+.0f} ms from due")
    assert got["message_id"] == sent["message_id"] and got["delivery_timestamp"] == due_ms
    assert got["t"] * 1000 >= due_ms


def test_unacked_message_back_after_invisible_time(v5_server: Any, tmp_path: Path) -> None:
    timed_duplicate_on_the_reference(v5_server)
    _setup(v5_server, "N5Unacked", "N5UnackedGroup")
    (sent,) = _produce(v5_server, tmp_path / "p", "N5Unacked", "--count", "1", "--body-prefix", "u-").of("sent")
    run = _simple(v5_server, tmp_path / "c", "N5Unacked", "N5UnackedGroup", "--count", "2", "--invisible-s", "3",
                  "--ack-from-attempt", "2", "--linger-s", "2", "--max-s", "40")  # fmt: skip
    received = run.of("received")
    assert [(e["message_id"], e["attempt"]) for e in received] == [(sent["message_id"], 1), (sent["message_id"], 2)]
    assert [e["attempt"] for e in run.of("acked")] == [2]
    assert received[1]["t"] - received[0]["t"] >= 2.5  # not before its invisible time


def test_change_invisible_duration(v5_server: Any, tmp_path: Path) -> None:
    timed_duplicate_on_the_reference(v5_server)
    _setup(v5_server, "N5Change", "N5ChangeGroup")
    (sent,) = _produce(v5_server, tmp_path / "p", "N5Change", "--count", "1", "--body-prefix", "c-").of("sent")
    run = _simple(v5_server, tmp_path / "c", "N5Change", "N5ChangeGroup", "--count", "2", "--invisible-s", "40",
                  "--change-invisible-s", "3", "--ack-from-attempt", "2", "--max-s", "35", timeout_s=60)  # fmt: skip
    assert len(run.of("changed")) == 1 and not run.of("change_error")
    received = run.of("received")
    assert [(e["message_id"], e["attempt"]) for e in received] == [(sent["message_id"], 1), (sent["message_id"], 2)]
    waited = received[1]["t"] - received[0]["t"]
    assert 2.5 <= waited < 30, waited  # the new time (3 s), not the old (40 s)
    assert [e["attempt"] for e in run.of("acked")] == [2]


def test_max_attempts_then_dlq(v5_server: Any, tmp_path: Path) -> None:
    timed_duplicate_on_the_reference(v5_server)
    _setup(v5_server, "N5Dlq", "N5DlqGroup", max_retries=1)  # max attempts 2
    (sent,) = _produce(v5_server, tmp_path / "p", "N5Dlq", "--count", "1", "--body-prefix", "d-").of("sent")
    run = _simple(v5_server, tmp_path / "c", "N5Dlq", "N5DlqGroup", "--count", "2", "--invisible-s", "2",
                  "--no-ack", "--linger-s", "8", "--max-s", "40")  # fmt: skip
    assert [e["attempt"] for e in run.of("received")] == [1, 2]  # never a third delivery
    dlq = asyncio.run(_pull_all(v5_server.broker_addr, f"{DLQ_GROUP_TOPIC_PREFIX}N5DlqGroup", 1))
    assert [m.body for m in dlq] == [b"d-0"]
    assert dlq[0].properties.get("UNIQ_KEY") == sent["message_id"]


def test_tag_filter(v5_server: Any, tmp_path: Path) -> None:
    _setup(v5_server, "N5Tags", "N5TagsGroup")
    _produce(v5_server, tmp_path / "a", "N5Tags", "--count", "3", "--body-prefix", "a-", "--tag", "TagA")
    _produce(v5_server, tmp_path / "b", "N5Tags", "--count", "2", "--body-prefix", "b-", "--tag", "TagB")
    run = _simple(v5_server, tmp_path / "c", "N5Tags", "N5TagsGroup", "--count", "3", "--invisible-s", "10",
                  "--tag-expr", "TagA || TagC", "--linger-s", "3", "--max-s", "30")  # fmt: skip
    assert sorted(e["body"] for e in run.of("received")) == ["a-0", "a-1", "a-2"]


def test_sql92_filter(v5_server: Any, tmp_path: Path) -> None:
    _setup(v5_server, "N5Sql", "N5SqlGroup")
    _produce(v5_server, tmp_path / "a", "N5Sql", "--count", "2", "--body-prefix", "blue-", "--property", "color=blue")
    _produce(v5_server, tmp_path / "b", "N5Sql", "--count", "3", "--body-prefix", "red-", "--property", "color=red")
    run = _simple(v5_server, tmp_path / "c", "N5Sql", "N5SqlGroup", "--count", "2", "--invisible-s", "10",
                  "--sql", "color = 'blue'", "--linger-s", "3", "--max-s", "30")  # fmt: skip
    assert sorted(e["body"] for e in run.of("received")) == ["blue-0", "blue-1"]


def test_push_consumer_consumes_exactly(v5_server: Any, tmp_path: Path) -> None:
    _setup(v5_server, "N5Push", "N5PushGroup")
    sent = _produce(v5_server, tmp_path / "p", "N5Push", "--count", "4", "--body-prefix", "p-").of("sent")
    run = _push(v5_server, tmp_path / "c", "N5Push", "N5PushGroup", "--count", "4", "--linger-s", "3",
                "--max-s", "40")  # fmt: skip
    consumed = run.of("consumed")
    assert sorted(e["message_id"] for e in consumed) == sorted(e["message_id"] for e in sent)
    assert {(e["result"], e["attempt"]) for e in consumed} == {("SUCCESS", 1)}


def test_push_consumer_failures_redelivered(v5_server: Any, tmp_path: Path) -> None:
    timed_duplicate_on_the_reference(v5_server)
    _setup(v5_server, "N5PushRetry", "N5PushRetryGroup")
    sent = _produce(v5_server, tmp_path / "p", "N5PushRetry", "--count", "3", "--body-prefix", "r-").of("sent")
    run = _push(v5_server, tmp_path / "c", "N5PushRetry", "N5PushRetryGroup", "--count", "3", "--fail-first", "2",
                "--linger-s", "3", "--max-s", "50", timeout_s=75)  # fmt: skip
    consumed = run.of("consumed")
    failed = [e for e in consumed if e["result"] == "FAILURE"]
    succeeded = [e for e in consumed if e["result"] == "SUCCESS"]
    assert len(failed) == 2
    assert sorted(e["message_id"] for e in succeeded) == sorted(e["message_id"] for e in sent)
    for f in failed:  # each failure came back: a later attempt of the same message succeeded
        again = [e for e in succeeded if e["message_id"] == f["message_id"]]
        assert again and again[0]["attempt"] > f["attempt"], (f, again)


def test_fifo_push_consumer_in_order_failure_to_dlq(v5_server: Any, tmp_path: Path) -> None:
    """A PushConsumer of a FIFO group: a message group consumed in send order, one message at a
    time. The group's retry policy comes in Settings as a customized backoff, which the Node client
    1.0.8 does not read (an exponential one only): its FIFO consumption then has one attempt, so a
    failed message goes at once to the DLQ through ForwardMessageToDeadLetterQueue and the next
    one follows (5.3.3 and Pumice alike)."""
    _setup(v5_server, "N5FifoPush", "N5FifoPushGroup", kind="FIFO")
    sent = _produce(v5_server, tmp_path / "p", "N5FifoPush", "--count", "4", "--body-prefix", "q-", "--message-group",
                    "g1").of("sent")  # fmt: skip
    run = _push(v5_server, tmp_path / "c", "N5FifoPush", "N5FifoPushGroup", "--count", "3", "--fail-first", "1",
                "--linger-s", "2", "--max-s", "40")  # fmt: skip
    got = [(e["body"], e["result"]) for e in run.of("consumed")]
    assert got == [("q-0", "FAILURE"), ("q-1", "SUCCESS"), ("q-2", "SUCCESS"), ("q-3", "SUCCESS")]
    dlq = asyncio.run(_pull_all(v5_server.broker_addr, f"{DLQ_GROUP_TOPIC_PREFIX}N5FifoPushGroup", 1))
    assert [(m.body, m.properties.get("UNIQ_KEY")) for m in dlq] == [(b"q-0", sent[0]["message_id"])]


# -- the wrapper and the driver, without a server -----------------------------------------------


def test_missing_client_fails_with_the_install_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PUMICE_V5_NODE_DIR", str(tmp_path / "no-client"))
    with pytest.raises(AssertionError, match=r"rocketmq-client-nodejs 1\.0\.8.*bash tests/peers5-node/install\.sh"):
        v5_node.run("produce", "127.0.0.1:1", "--topic", "T", home=tmp_path / "h")


def test_unserved_endpoint_and_bad_arguments_end_the_driver_with_an_error(tmp_path: Path, node_client: Path) -> None:
    endpoint = f"127.0.0.1:{free_port()}"  # nothing listens there
    t0 = time.monotonic()
    r = v5_node.run("produce", endpoint, "--topic", "NoSuchServer", "--body", "x", home=tmp_path / "p", timeout_s=40)
    assert r.rc == 2 and not r.of("sent") and r.of("error")[-1] is r.events[-1], r.describe()
    assert "route" in r.error, r.describe()
    assert time.monotonic() - t0 < 30
    r = v5_node.run("simple-consume", endpoint, "--topic", "T", "--group", "G", "--count", "x", home=tmp_path / "c")
    assert r.rc == 2 and r.error == 'bad arguments: --count takes a number, not "x"', r.describe()


def test_watchdog_ends_a_client_that_never_starts(tmp_path: Path, node_client: Path) -> None:
    """A server that accepts the connection and never answers: the client's startup waits (its
    route query, then the settings), the driver's watchdog ends it."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        endpoint = f"127.0.0.1:{silent.getsockname()[1]}"
        t0 = time.monotonic()
        r = v5_node.run("push-consume", endpoint, "--topic", "T", "--group", "G", "--count", "1", "--max-s", "60",
                        home=tmp_path / "c", timeout_s=8)  # fmt: skip
    assert r.rc == 3 and r.error == "timed out after 3s (push-consume)", r.describe()
    assert time.monotonic() - t0 < 8
