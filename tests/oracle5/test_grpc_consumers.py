"""The official Python v5 client's consumers (rocketmq-python-client 5.1.2, tests/peers5) against
Pumice's gRPC endpoint and against RocketMQ 5.3.3's proxy in LOCAL mode, the same scenario and
the same exact counts for both (``v5_server``, each server started once per module):

- SimpleConsumer: a message left unacked comes back after its invisible time with delivery
  attempt 2; ChangeInvisibleDuration shortens it (back after the new time, well before the old);
  past max attempts (the group's retryMaxTimes + 1) the message goes to ``%DLQ%<group>``, read
  back with a PULL on the broker's remoting port; a tag filter and an SQL92 filter.
- PushConsumer: N messages consumed exactly; the listener's first failures redelivered; a
  listener slower than the invisible time, its message renewed by the proxy (auto_renew).
- FIFO groups (consumeMessageOrderly): a message group in send order, the next only after the
  ack, for a SimpleConsumer and a PushConsumer.
- A delay message received once its delivery timestamp is due.

Both servers run with ``enablePropertyFilter=true`` (SQL92) and the proxies'
``minInvisibleTimeMillsForRecv`` lowered to 2 s and ``defaultInvisibleTimeMills`` to 4 s (5.3.3
reads them from rmq-proxy.json), so invisible times of a few seconds keep the module short."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pumice.common.mix_all import DLQ_GROUP_TOPIC_PREFIX
from tests.helpers import v5_python
from tests.helpers.pop_client import PopClient
from tests.helpers.pumice5 import PumiceV5
from tests.helpers.rocketmq5 import (
    SHARED_BROKER_CONF,
    SHARED_PROXY_CONF,
    _conf_value,
    serve,
)

# The worker's shared RocketMQ 5.3.3 (tests/conftest.py's rocketmq5_shared: SQL92 filters on,
# SHARED_BROKER_CONF, and the proxy's invisible and renewal times of SHARED_PROXY_CONF), and a
# Pumice of the module's own with the same settings
SERVERS: dict[str, Any] = {
    "rocketmq5": None,
    "pumice": lambda root: PumiceV5(
        root, "".join(f"{k}={_conf_value(v)}\n" for k, v in SHARED_BROKER_CONF.items()), dict(SHARED_PROXY_CONF)
    ),
}


@pytest.fixture(scope="module", params=sorted(SERVERS))
def v5_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    yield from serve(request, tmp_path_factory, SERVERS)


def _setup(server: Any, topic: str, group: str, max_retries: int = 16, kind: str = "NORMAL") -> None:
    server.create_topic(topic, queues=2, message_type=kind)
    server.create_group(group, fifo=kind == "FIFO", max_retries=max_retries)


def _produce(server: Any, home: Path, topic: str, *args: str) -> list[dict[str, Any]]:
    return v5_python.run("produce", server.grpc_endpoint, "--topic", topic, *args, home=home).ok().of("sent")


def _simple(server: Any, home: Path, topic: str, group: str, *args: str, timeout_s: float = 90) -> v5_python.V5Run:
    return v5_python.run("simple-consume", server.grpc_endpoint, "--topic", topic, "--group", group,
                         "--await-s", "5", *args, home=home, timeout_s=timeout_s).ok()  # fmt: skip


def test_unacked_message_comes_back_with_attempt_2(v5_server: Any, tmp_path: Path, v5_client: Path) -> None:
    _setup(v5_server, "V5Unacked", "V5UnackedGroup")
    (sent,) = _produce(v5_server, tmp_path / "p", "V5Unacked", "--count", "1", "--body-prefix", "u-")
    run = _simple(v5_server, tmp_path / "c", "V5Unacked", "V5UnackedGroup", "--count", "2", "--invisible-s", "3",
                  "--ack-from-attempt", "2", "--linger-s", "2", "--max-s", "45")  # fmt: skip
    received = run.of("received")
    assert [(e["message_id"], e["attempt"]) for e in received] == [(sent["message_id"], 1), (sent["message_id"], 2)]
    assert [e["attempt"] for e in run.of("acked")] == [2]
    assert received[1]["t"] - received[0]["t"] >= 2.5  # not before its invisible time


def test_change_invisible_duration_shortens_it(v5_server: Any, tmp_path: Path, v5_client: Path) -> None:
    _setup(v5_server, "V5Change", "V5ChangeGroup")
    (sent,) = _produce(v5_server, tmp_path / "p", "V5Change", "--count", "1", "--body-prefix", "c-")
    run = _simple(v5_server, tmp_path / "c", "V5Change", "V5ChangeGroup", "--count", "2", "--invisible-s", "40",
                  "--change-invisible-s", "3", "--ack-from-attempt", "2", "--max-s", "35")  # fmt: skip
    assert len(run.of("changed")) == 1 and not run.of("change_error")
    received = run.of("received")
    assert [(e["message_id"], e["attempt"]) for e in received] == [(sent["message_id"], 1), (sent["message_id"], 2)]
    waited = received[1]["t"] - received[0]["t"]
    assert 2.5 <= waited < 30, waited  # the new time (3 s), not the old (40 s)
    assert [e["attempt"] for e in run.of("acked")] == [2]  # the new receipt handle acks it


async def _pull_all(addr: str, topic: str, want: int, timeout_s: float = 20) -> list[Any]:
    client = PopClient(addr, "")
    try:
        got: list[Any] = []
        deadline = time.monotonic() + timeout_s
        while len(got) < want and time.monotonic() < deadline:
            got = await client.pull(topic, 0)
            if len(got) < want:
                await asyncio.sleep(0.5)
        return got
    finally:
        await client.close()


def test_max_attempts_then_dlq(v5_server: Any, tmp_path: Path, v5_client: Path) -> None:
    _setup(v5_server, "V5Dlq", "V5DlqGroup", max_retries=1)  # max attempts 2
    (sent,) = _produce(v5_server, tmp_path / "p", "V5Dlq", "--count", "1", "--body-prefix", "d-")
    run = _simple(v5_server, tmp_path / "c", "V5Dlq", "V5DlqGroup", "--count", "2", "--invisible-s", "2",
                  "--no-ack", "--linger-s", "10", "--max-s", "40")  # fmt: skip
    assert [e["attempt"] for e in run.of("received")] == [1, 2]  # never a third delivery
    dlq = asyncio.run(_pull_all(v5_server.broker_addr, f"{DLQ_GROUP_TOPIC_PREFIX}V5DlqGroup", 1))
    assert [m.body for m in dlq] == [b"d-0"]
    assert dlq[0].properties.get("UNIQ_KEY") == sent["message_id"]


def test_tag_filter(v5_server: Any, tmp_path: Path, v5_client: Path) -> None:
    _setup(v5_server, "V5Tags", "V5TagsGroup")
    _produce(v5_server, tmp_path / "a", "V5Tags", "--count", "3", "--body-prefix", "a-", "--tag", "TagA")
    _produce(v5_server, tmp_path / "b", "V5Tags", "--count", "2", "--body-prefix", "b-", "--tag", "TagB")
    run = _simple(v5_server, tmp_path / "c", "V5Tags", "V5TagsGroup", "--count", "3", "--invisible-s", "10",
                  "--tag-expr", "TagA", "--linger-s", "3", "--max-s", "30")  # fmt: skip
    assert sorted(e["body"] for e in run.of("received")) == ["a-0", "a-1", "a-2"]


def test_sql92_filter(v5_server: Any, tmp_path: Path, v5_client: Path) -> None:
    _setup(v5_server, "V5Sql", "V5SqlGroup")
    _produce(v5_server, tmp_path / "a", "V5Sql", "--count", "2", "--body-prefix", "blue-", "--property", "color=blue")
    _produce(v5_server, tmp_path / "b", "V5Sql", "--count", "3", "--body-prefix", "red-", "--property", "color=red")
    run = _simple(v5_server, tmp_path / "c", "V5Sql", "V5SqlGroup", "--count", "2", "--invisible-s", "10",
                  "--sql", "color = 'blue'", "--linger-s", "3", "--max-s", "30")  # fmt: skip
    assert sorted(e["body"] for e in run.of("received")) == ["blue-0", "blue-1"]


def test_push_consumer_exact_count_and_failures_redelivered(v5_server: Any, tmp_path: Path, v5_client: Path) -> None:
    _setup(v5_server, "V5Push", "V5PushGroup")
    sent = _produce(v5_server, tmp_path / "p", "V5Push", "--count", "4", "--body-prefix", "p-")
    run = v5_python.run("push-consume", v5_server.grpc_endpoint, "--topic", "V5Push", "--group", "V5PushGroup",
                        "--count", "4", "--fail-first", "2", "--threads", "1", "--linger-s", "3", "--max-s", "60",
                        home=tmp_path / "c", timeout_s=90).ok()  # fmt: skip
    consumed = run.of("consumed")
    failed = [e for e in consumed if e["result"] == "FAILURE"]
    succeeded = [e for e in consumed if e["result"] == "SUCCESS"]
    assert len(failed) == 2
    assert sorted(e["message_id"] for e in succeeded) == sorted(e["message_id"] for e in sent)
    # each failure came back: a later attempt of the same message succeeded
    for f in failed:
        again = [e for e in succeeded if e["message_id"] == f["message_id"]]
        assert again and again[0]["attempt"] > f["attempt"], (f, again)


def test_push_consumer_auto_renew(v5_server: Any, tmp_path: Path, v5_client: Path) -> None:
    """A listener slower than defaultInvisibleTimeMills (4 s here): the proxy renews the handle
    it holds, so the message is consumed once, at attempt 1, and its ack (the client's handle is
    stale by then) lands. (5.3.3 on a loaded machine: that ack seen refused, INVALID_RECEIPT_HANDLE,
    and the message released again; the push consumer's 20 s poll kept it out of the linger.)"""
    _setup(v5_server, "V5Renew", "V5RenewGroup")
    (sent,) = _produce(v5_server, tmp_path / "p", "V5Renew", "--count", "1", "--body-prefix", "r-")
    run = v5_python.run("push-consume", v5_server.grpc_endpoint, "--topic", "V5Renew", "--group", "V5RenewGroup",
                        "--count", "1", "--consume-s", "9", "--threads", "2", "--linger-s", "6", "--max-s", "40",
                        home=tmp_path / "c", timeout_s=70).ok()  # fmt: skip
    assert [(e["message_id"], e["attempt"]) for e in run.of("consuming")] == [(sent["message_id"], 1)]
    assert [e["result"] for e in run.of("consumed")] == ["SUCCESS"]


def test_fifo_group_delivers_a_message_group_in_order(v5_server: Any, tmp_path: Path, v5_client: Path) -> None:
    """A FIFO group (consumeMessageOrderly): the next message of a message group only once the
    one before is acked; an unacked one comes back first."""
    _setup(v5_server, "V5FifoC", "V5FifoCGroup", kind="FIFO")
    _produce(v5_server, tmp_path / "p", "V5FifoC", "--count", "3", "--body-prefix", "f-", "--message-group", "g1")
    run = _simple(v5_server, tmp_path / "c", "V5FifoC", "V5FifoCGroup", "--count", "6", "--batch", "1",
                  "--invisible-s", "2", "--ack-from-attempt", "2", "--linger-s", "2", "--max-s", "60")  # fmt: skip
    got = [(e["body"], e["attempt"]) for e in run.of("received")]
    assert got == [("f-0", 1), ("f-0", 2), ("f-1", 1), ("f-1", 2), ("f-2", 1), ("f-2", 2)]


def test_delivery_timestamp(v5_server: Any, tmp_path: Path, v5_client: Path) -> None:
    """A delay message (RIP-43 timer): received once due, not before."""
    _setup(v5_server, "V5Delay", "V5DelayGroup", kind="DELAY")
    (sent,) = _produce(v5_server, tmp_path / "p", "V5Delay", "--count", "1", "--body-prefix", "t-", "--delay-s", "4")
    run = _simple(v5_server, tmp_path / "c", "V5Delay", "V5DelayGroup", "--count", "1", "--invisible-s", "10",
                  "--linger-s", "2", "--max-s", "30")  # fmt: skip
    (got,) = run.of("received")
    due_s = sent["delivery_timestamp"]  # whole seconds, as the Python client sends it
    print(f"delay: due {due_s - sent['t']:.2f}s after the send, received {got['t'] - due_s:+.2f}s from due")
    assert got["message_id"] == sent["message_id"] and got["delivery_timestamp"] == due_s * 1000
    assert got["t"] >= due_s


def test_fifo_push_consumer_in_order(v5_server: Any, tmp_path: Path, v5_client: Path) -> None:
    """A PushConsumer of a FIFO group (Settings ``fifo``, QueryAssignment of every queue): a
    message group consumed in send order, the failed one retried before the next."""
    _setup(v5_server, "V5FifoPush", "V5FifoPushGroup", kind="FIFO")
    _produce(v5_server, tmp_path / "p", "V5FifoPush", "--count", "4", "--body-prefix", "q-", "--message-group", "g1")
    run = v5_python.run("push-consume", v5_server.grpc_endpoint, "--topic", "V5FifoPush", "--group",
                        "V5FifoPushGroup", "--count", "4", "--fail-first", "1", "--threads", "2", "--linger-s", "2",
                        "--max-s", "60", home=tmp_path / "c", timeout_s=90).ok()  # fmt: skip
    got = [(e["body"], e["result"]) for e in run.of("consumed")]
    assert got == [("q-0", "FAILURE"), ("q-0", "SUCCESS"), ("q-1", "SUCCESS"), ("q-2", "SUCCESS"), ("q-3", "SUCCESS")]
