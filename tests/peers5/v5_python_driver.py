"""Drive the official RocketMQ 5 Python client (rocketmq-python-client 5.1.2, gRPC) for the tests.

Run by the venv of tests/peers5/install.sh (never by Pumice's python: the client pins its own
grpcio and protobuf), through tests/helpers/v5_python.py:

    <venv>/bin/python tests/peers5/v5_python_driver.py <subcommand> --endpoint HOST:PORT ...

Every subcommand prints one JSON object per line and event, ``{"event": ..., "t": <unix s>, ...}``,
and ends with ``done`` (exit 0) or ``error`` (a message; exit 2, or 3 when ``--timeout-s``
passed: a watchdog ends the process whatever the client is doing). Every loop is bounded in
count and time.

==============  ==========================================================================
subcommand      events
==============  ==========================================================================
produce         ``sent`` per message (message_id, transaction_id, body, tag, keys,
                message_group, delivery_timestamp, send_ms: the send's own time),
                ``committed`` / ``rolled_back`` per transaction ended by the client,
                ``checked`` per check-back the checker answered (``--transaction unknown``)
simple-consume  ``received`` per message (message_id, body, attempt, tag, keys,
                message_group, properties, ...), ``acked``, ``changed`` (a new invisible
                duration), ``receive_error`` / ``ack_error``
push-consume    ``consuming`` when the listener is called (message_id, attempt), ``consumed``
                when it returns (the message's fields, ``result`` SUCCESS or FAILURE)
==============  ==========================================================================

``--tls`` opens the client's channels with TLS (its ``tls_enable``; the client checks the
server's certificate against grpcio's roots: ``--tls-roots`` names a PEM file to trust instead,
through GRPC_DEFAULT_SSL_ROOTS_FILE_PATH).

The client logs to ``~/logs/rocketmq_python``: the wrapper sets HOME to the test's directory.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from typing import Any

from rocketmq import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    Message,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
    TransactionChecker,
    TransactionResolution,
)
from rocketmq.grpc_protocol import FilterType

_out_lock = threading.Lock()
MAX_RECEIVE_ERRORS = 5  # in a row: a server that refuses the request (e.g. ILLEGAL_INVISIBLE_TIME) ends the run


def emit(event: str, **fields: Any) -> None:
    line = json.dumps({"event": event, "t": round(time.time(), 3), **fields}, default=str)
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def fail(message: str, code: int = 2) -> None:
    """Report and end the process at once (client threads may still run)."""
    emit("error", message=message)
    sys.stderr.write(f"v5_python_driver: {message}\n")
    sys.stderr.flush()
    os._exit(code)


def message_fields(m: Message) -> dict[str, Any]:
    body = m.body or b""
    return {
        "message_id": m.message_id,
        "topic": m.topic,
        "body": body.decode("utf-8", errors="backslashreplace"),
        "attempt": m.delivery_attempt,
        "tag": m.tag,
        "keys": sorted(m.keys or ()),
        "message_group": m.message_group,
        "delivery_timestamp": m.delivery_timestamp,  # ms
        "born_timestamp": m.born_timestamp,  # ms
        "properties": dict(m.properties or {}),
        "corrupted": bool(m.corrupted),
    }


def configuration(args: argparse.Namespace) -> ClientConfiguration:
    return ClientConfiguration(args.endpoint, Credentials(args.ak, args.sk), args.namespace, args.request_timeout_s)


def filter_expression(args: argparse.Namespace) -> FilterExpression:
    if args.sql is not None:
        return FilterExpression(args.sql, FilterType.SQL)
    return FilterExpression(args.tag_expr)


def shutdown(client: Any) -> None:
    try:
        client.shutdown()
    except Exception as e:  # reported, not fatal: the events so far stand
        emit("shutdown_error", message=f"{type(e).__name__}: {e}")


# -- produce --


class Checker(TransactionChecker):
    """Answers a check-back (an orphaned transaction) with ``--check-answer``."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.calls = 0
        self.cond = threading.Condition()

    def check(self, message: Message) -> TransactionResolution:
        emit("checked", answer=self.answer, **message_fields(message))
        with self.cond:
            self.calls += 1
            self.cond.notify_all()
        return TransactionResolution.COMMIT if self.answer == "commit" else TransactionResolution.ROLLBACK


def produce(args: argparse.Namespace) -> None:
    bodies = args.body or [f"{args.body_prefix}{i}" for i in range(args.count)]
    if args.body_size:  # padded: a benchmark's fixed-size bodies
        bodies = [b.ljust(args.body_size, "x") for b in bodies]
    checker = Checker(args.check_answer) if args.transaction else None
    producer = Producer(configuration(args), (args.topic,), checker, tls_enable=args.tls)
    producer.startup()
    try:
        for body in bodies:
            msg = Message()
            msg.topic = args.topic
            msg.body = body.encode()
            if args.tag:
                msg.tag = args.tag
            if args.keys:
                msg.keys = args.keys[0]  # the setter takes one key at a time
                for key in args.keys[1:]:
                    msg.keys = key
            for kv in args.property:
                k, _, v = kv.partition("=")
                msg.add_property(k, v)
            if args.message_group:
                msg.message_group = args.message_group
            if args.delay_s is not None:
                msg.delivery_timestamp = int(time.time() + args.delay_s)  # seconds: what the client sends
            tx = producer.begin_transaction() if args.transaction else None
            started = time.perf_counter()
            try:
                receipt = producer.send(msg, tx) if tx is not None else producer.send(msg)
            except Exception as e:
                fail(f"send of {body!r} to {args.topic} failed: {type(e).__name__}: {e}")
            emit(
                "sent", message_id=receipt.message_id, transaction_id=receipt.transaction_id, body=body,
                tag=args.tag, keys=sorted(args.keys), message_group=args.message_group,
                delivery_timestamp=msg.delivery_timestamp, offset=receipt.offset,
                send_ms=round((time.perf_counter() - started) * 1000, 3),
            )  # fmt: skip
            if tx is not None and args.transaction in ("commit", "rollback"):
                try:
                    if args.transaction == "commit":
                        tx.commit()
                    else:
                        tx.rollback()
                except Exception as e:
                    fail(f"{args.transaction} of {receipt.message_id} failed: {type(e).__name__}: {e}")
                emit("committed" if args.transaction == "commit" else "rolled_back", message_id=receipt.message_id)
            if args.interval_s:
                time.sleep(args.interval_s)
        if checker is not None and args.transaction == "unknown":
            want = args.await_checks if args.await_checks is not None else len(bodies)
            deadline = time.monotonic() + args.check_wait_s
            with checker.cond:
                while checker.calls < want and time.monotonic() < deadline:
                    checker.cond.wait(max(0.0, deadline - time.monotonic()))
            if checker.calls < want:
                fail(f"{checker.calls} check-backs of {want} within {args.check_wait_s}s")
            time.sleep(args.linger_s)  # the EndTransaction of the last answer goes out after check() returns
        emit("done", sent=len(bodies), checks=checker.calls if checker else 0)
    finally:
        shutdown(producer)


# -- simple-consume --


def simple_consume(args: argparse.Namespace) -> None:
    consumer = SimpleConsumer(configuration(args), args.group, {args.topic: filter_expression(args)}, args.await_s,
                              tls_enable=args.tls)  # fmt: skip
    consumer.startup()
    received = acked = errors = 0
    seen: set[str] = set()
    try:
        deadline = time.monotonic() + args.max_s
        linger_end: float | None = None
        while time.monotonic() < (linger_end if linger_end is not None else deadline):
            if linger_end is None and received >= args.count:
                linger_end = time.monotonic() + args.linger_s
                continue
            try:
                messages = consumer.receive(args.batch, args.invisible_s) or []
                errors = 0
            except Exception as e:
                errors += 1
                emit("receive_error", message=f"{type(e).__name__}: {e}")
                if errors >= MAX_RECEIVE_ERRORS:
                    fail(f"{errors} receive errors in a row, the last: {type(e).__name__}: {e}")
                time.sleep(0.5)
                continue
            for m in messages:
                received += 1
                fields = message_fields(m)
                emit("received", group=args.group, **fields)
                attempt = m.delivery_attempt or 0
                if args.ack and attempt >= args.ack_from_attempt:
                    try:
                        consumer.ack(m)
                        acked += 1
                        emit("acked", message_id=m.message_id, attempt=attempt)
                    except Exception as e:
                        emit("ack_error", message_id=m.message_id, message=f"{type(e).__name__}: {e}")
                elif args.change_invisible_s is not None and m.message_id not in seen:
                    try:
                        consumer.change_invisible_duration(m, args.change_invisible_s)
                        emit("changed", message_id=m.message_id, invisible_s=args.change_invisible_s)
                    except Exception as e:
                        emit("change_error", message_id=m.message_id, message=f"{type(e).__name__}: {e}")
                seen.add(m.message_id)
        if received < args.count and not args.allow_fewer:
            fail(f"received {received} of {args.count} messages within {args.max_s}s")
        emit("done", received=received, acked=acked)
    finally:
        shutdown(consumer)


# -- push-consume --


class Listener(MessageListener):
    """FAILURE for the first ``fail_first`` calls, then SUCCESS; counts the successes."""

    def __init__(self, fail_first: int, group: str, consume_s: float = 0) -> None:
        self.fail_first, self.group, self.consume_s = fail_first, group, consume_s
        self.calls = self.successes = 0
        self.cond = threading.Condition()

    def consume(self, message: Message) -> ConsumeResult:
        emit("consuming", group=self.group, message_id=message.message_id, attempt=message.delivery_attempt)
        time.sleep(self.consume_s)  # a slow listener: the proxy renews what it holds meanwhile
        with self.cond:
            self.calls += 1
            ok = self.calls > self.fail_first
            if ok:
                self.successes += 1
            self.cond.notify_all()
        emit("consumed", group=self.group, result="SUCCESS" if ok else "FAILURE", **message_fields(message))
        return ConsumeResult.SUCCESS if ok else ConsumeResult.FAILURE


def push_consume(args: argparse.Namespace) -> None:
    listener = Listener(args.fail_first, args.group, args.consume_s)
    consumer = PushConsumer(
        configuration(args), args.group, listener, {args.topic: filter_expression(args)},
        consumption_thread_count=args.threads, tls_enable=args.tls,
    )  # fmt: skip
    consumer.startup()
    try:
        deadline = time.monotonic() + args.max_s
        with listener.cond:
            while listener.successes < args.count and time.monotonic() < deadline:
                listener.cond.wait(max(0.0, deadline - time.monotonic()))
        time.sleep(args.linger_s)  # more calls (duplicates, redeliveries) are reported too
        if listener.successes < args.count and not args.allow_fewer:
            fail(f"{listener.successes} successful consumptions of {args.count} within {args.max_s}s")
        emit("done", calls=listener.calls, successes=listener.successes)
    finally:
        shutdown(consumer)


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--endpoint", required=True, help="host:port of the gRPC MessagingService")
    common.add_argument("--topic", required=True)
    common.add_argument("--ak", default="")
    common.add_argument("--sk", default="")
    common.add_argument("--namespace", default="")
    common.add_argument("--request-timeout-s", type=int, default=3)
    common.add_argument("--timeout-s", type=float, default=120, help="the watchdog: exit 3 past it")
    common.add_argument("--linger-s", type=float, default=0, help="keep going this long after the target")
    common.add_argument("--tls", action="store_true", help="TLS channels (the client's tls_enable)")
    common.add_argument("--tls-roots", help="a PEM file of certificates to trust (with --tls)")

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)

    pr = sub.add_parser("produce", parents=[common])
    pr.add_argument("--count", type=int, default=1)
    pr.add_argument("--body-prefix", default="m", help="bodies <prefix>0 .. <prefix><count - 1>")
    pr.add_argument("--body", action="append", help="a body (repeat; instead of --count)")
    pr.add_argument("--body-size", type=int, default=0, help="pad each body with x to this many bytes")
    pr.add_argument("--tag")
    pr.add_argument("--keys", action="append", default=[])
    pr.add_argument("--property", action="append", default=[], help="k=v (repeat)")
    pr.add_argument("--message-group", help="a FIFO message")
    pr.add_argument("--delay-s", type=float, help="delivery timestamp this far ahead")
    pr.add_argument("--transaction", choices=["commit", "rollback", "unknown"])
    pr.add_argument("--check-answer", choices=["commit", "rollback"], default="commit")
    pr.add_argument("--await-checks", type=int, help="check-backs to wait for (unknown: one per message)")
    pr.add_argument("--check-wait-s", type=float, default=60)
    pr.add_argument("--interval-s", type=float, default=0)

    filt = argparse.ArgumentParser(add_help=False)
    g = filt.add_mutually_exclusive_group()
    g.add_argument("--tag-expr", default="*")
    g.add_argument("--sql")

    sc = sub.add_parser("simple-consume", parents=[common, filt])
    sc.add_argument("--group", required=True)
    sc.add_argument("--count", type=int, default=1, help="messages to receive (0: just --linger-s)")
    sc.add_argument("--invisible-s", type=int, default=20)
    sc.add_argument("--await-s", type=int, default=5, help="long polling of each receive")
    sc.add_argument("--batch", type=int, default=16)
    ack = sc.add_mutually_exclusive_group()
    ack.add_argument("--ack", dest="ack", action="store_true", default=True)
    ack.add_argument("--no-ack", dest="ack", action="store_false")
    sc.add_argument("--ack-from-attempt", type=int, default=1, help="leave earlier attempts unacked")
    sc.add_argument("--change-invisible-s", type=int, help="for an unacked message seen the first time")
    sc.add_argument("--max-s", type=float, default=60)
    sc.add_argument("--allow-fewer", action="store_true")

    pc = sub.add_parser("push-consume", parents=[common, filt])
    pc.add_argument("--group", required=True)
    pc.add_argument("--count", type=int, default=1, help="successful consumptions to wait for")
    pc.add_argument("--fail-first", type=int, default=0, help="the first N calls return FAILURE")
    pc.add_argument("--threads", type=int, default=4)
    pc.add_argument("--consume-s", type=float, default=0, help="each call of the listener takes this long")
    pc.add_argument("--max-s", type=float, default=60)
    pc.add_argument("--allow-fewer", action="store_true")
    return p


def main() -> None:
    args = parser().parse_args()
    if args.tls_roots:  # read by grpcio when the client makes its first TLS credentials
        os.environ["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"] = args.tls_roots
    watchdog = threading.Timer(args.timeout_s, fail, (f"timed out after {args.timeout_s}s ({args.command})", 3))
    watchdog.daemon = True
    watchdog.start()
    run = {"produce": produce, "simple-consume": simple_consume, "push-consume": push_consume}[args.command]
    try:
        run(args)
    except Exception as e:
        fail(f"{args.command}: {type(e).__name__}: {e}")
    sys.stdout.flush()
    os._exit(0)  # the client's threads (its asyncio loop, schedulers) need not be waited for


if __name__ == "__main__":
    main()
