"""The broker's CPU per message, which no client bounds: single sends, batched sends, pulls, and
the long-polling wake-up.

    python3 -m bench.broker_cpu [--messages 100000] [--reps 3] [--no-pure] [--acl] [--tls]

For each build, a fresh `pumice namesrv` and `pumice broker` (ASYNC_FLUSH, sparse files, one
topic of 4 queues, 1 KiB bodies) in a temporary directory; the broker process's CPU time
(user + system, /proc, all its threads) is read before and after each phase and divided by the
messages the phase moved. The load comes from this process (``RemotingClient``, raw requests, each
message with a UNIQ_KEY as producers send them, uvloop), so its own cost is not counted:

* single: ``--messages`` SEND_MESSAGE_V2 requests, 1,024 in flight over 4 connections;
* batch: the same number of messages in SEND_BATCH_MESSAGE requests of 64;
* pull: every stored message read back with PULL_MESSAGE of 32 from offset 0, 4 queues at once;
* wake: one long-polling pull held on each queue while single sends arrive paced at 2,000/s; each
  send wakes its queue's pull and the consumer pulls again at once. The figure is the broker's
  CPU for the send, the wake-up and the next pull, per message.

``--acl`` adds them on the plain build with ``aclEnable=true``: one account
(every perm, no white list) in a fresh $ROCKETMQ_HOME/conf/plain_acl.yml, and every request of
this process signed with it, so the broker checks each signature and perm (its cost, not the
client's signing, is what the figure adds). ``--tls`` adds them with ``tlsMode=enforcing`` (a
self-signed EC P-256 certificate made with ``openssl``), every connection of this process TLS
1.3. Every run measures the native data plane (``plain``, ``pumice._native`` loaded) and the
pure-Python twins (``pure``, the broker started with ``PUMICE_PURE=1``) side by side; ``--no-pure``
leaves the second out. Builds alternate rep by rep; medians and min–max are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import ssl
import statistics
import subprocess
import tempfile
import time

from bench.broker_bench import QUEUES, _batch_body, _create_topic, _uniq_props, pull_request
from bench.processes import cpu_seconds, run_on_uvloop, start_local_cluster, stop_all, wait_idle
from pumice.common.acl_signer import SessionCredentials
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.tls import client_context
from pumice.store.message_check import scan_records

TOPIC = "CpuTopic"
ACL_ACCOUNT = SessionCredentials("benchUser1", "benchSecret1")
ACL_FILE = "accounts:\n  - accessKey: benchUser1\n    secretKey: benchSecret1\n    admin: true\n" \
    "    defaultTopicPerm: PUB|SUB\n    defaultGroupPerm: PUB|SUB\n"  # fmt: skip
_signer: list[SessionCredentials] = []  # the session's account, when it runs with ACL on
_tls: list[ssl.SSLContext] = []  # the session's client context, when it runs with TLS on


def _client() -> RemotingClient:
    c = RemotingClient(ssl_context=_tls[0] if _tls else None)
    if _signer:
        c.rpc_hook = _signer[0].sign_request
    return c


BODY = os.urandom(1024)
PHASES = ("single", "batch", "pull", "wake")


def _send_fields(qid: int, props: str = "") -> dict[str, object]:
    return {"a": "CpuPG", "b": TOPIC, "c": "TBW102", "d": QUEUES, "e": qid, "f": 0, "g": 0, "h": 0, "i": props}


async def _sends(addr: str, n: int, batch: int) -> int:
    """``n`` messages, in requests of ``batch`` (1: SEND_MESSAGE_V2), 256 requests in flight on
    each of 4 connections. Returns the messages acknowledged."""
    clients = [_client() for _ in range(4)]
    code, extra = (310, {}) if batch == 1 else (320, {"m": True})
    done = [0]
    todo = [n // batch]

    async def worker(c: RemotingClient, qid: int) -> None:
        while todo[0] > 0:
            todo[0] -= 1
            # each message with a UNIQ_KEY, as producers send them (the broker indexes it)
            if batch == 1:
                req = RemotingCommand(code=code, ext_fields=_send_fields(qid, _uniq_props()), body=BODY)
            else:
                req = RemotingCommand(
                    code=code, ext_fields={**_send_fields(qid), **extra}, body=_batch_body(batch, 1024)[0]
                )
            r = await c.invoke(addr, req, timeout_s=30)
            assert r.code == 0, (r.code, r.remark)
            done[0] += batch

    try:
        await asyncio.gather(*(worker(clients[i % 4], i % QUEUES) for i in range(1024 if batch == 1 else 16)))
    finally:
        for c in clients:
            await c.close()
    return done[0]


async def _pull_all(addr: str) -> int:
    """Every message of the topic, read from offset 0 on all queues at once."""
    c = _client()
    got = [0]

    async def queue(qid: int) -> None:
        offset = 0
        for _ in range(1_000_000):
            r = await c.invoke(addr, pull_request(TOPIC, qid, offset, suspend_ms=0), timeout_s=30)
            if r.code != 0:
                return
            body = bytes(r.body)
            got[0] += scan_records(body, 0, len(body), False)[1]
            offset = int(r.ext_fields["nextBeginOffset"])

    try:
        await asyncio.gather(*(queue(q) for q in range(QUEUES)))
    finally:
        await c.close()
    return got[0]


async def _wake(addr: str, n: int, rate: float) -> int:
    """``n`` single sends paced at ``rate``/s, each taken by a held long-polling pull."""
    c, consumer = _client(), _client()
    got = [0]
    offsets = [0] * QUEUES
    for q in range(QUEUES):  # start where the earlier phases left each queue
        r = await consumer.invoke(addr, RemotingCommand(code=30, ext_fields={"topic": TOPIC, "queueId": q}))
        offsets[q] = int(r.ext_fields["offset"])
    stop = [False]

    async def hold(qid: int) -> None:
        while not stop[0]:
            r = await consumer.invoke(addr, pull_request(TOPIC, qid, offsets[qid], suspend_ms=2000), timeout_s=10)
            if r.code == 0:
                body = bytes(r.body)
                got[0] += scan_records(body, 0, len(body), False)[1]
            offsets[qid] = int(r.ext_fields.get("nextBeginOffset", offsets[qid]))

    holders = [asyncio.create_task(hold(q)) for q in range(QUEUES)]
    await asyncio.sleep(0.5)  # every pull held
    t0 = time.perf_counter()
    sends = []
    for i in range(n):
        delay = t0 + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        req = RemotingCommand(code=310, ext_fields=_send_fields(i % QUEUES, _uniq_props()), body=BODY)
        sends.append(asyncio.ensure_future(c.invoke(addr, req, timeout_s=30)))
    await asyncio.gather(*sends)
    for _ in range(100):  # the last wake-ups
        if got[0] >= n:
            break
        await asyncio.sleep(0.05)
    stop[0] = True
    await asyncio.gather(*holders)
    await c.close()
    await consumer.close()
    return got[0]


def _self_signed(root: str) -> tuple[str, str]:
    cert, key = os.path.join(root, "cert.pem"), os.path.join(root, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1"],
                   check=True, capture_output=True, timeout=60)  # fmt: skip
    return cert, key


def _one_session(
    n: int, pythonpath: str | None, acl: bool = False, tls: bool = False, pure: bool = False
) -> dict[str, float]:
    """A fresh broker; each phase's broker CPU µs per message."""
    root = tempfile.mkdtemp(prefix="pumice-cpu-bench-")
    conf = "brokerClusterName=CpuCluster\nflushDiskType=ASYNC_FLUSH\n"
    _signer.clear()
    _tls.clear()
    if tls:
        cert, key = _self_signed(root)
        conf += f"tlsMode=enforcing\ntlsServerCertPath={cert}\ntlsServerKeyPath={key}\n"
        _tls.append(client_context(verify=False))
    if acl:
        os.makedirs(os.path.join(root, "home", "conf"))
        with open(os.path.join(root, "home", "conf", "plain_acl.yml"), "w") as f:
            f.write(ACL_FILE)
        conf += f"aclEnable=true\nrocketmqHome={os.path.join(root, 'home')}\n"
        _signer.append(ACL_ACCOUNT)
    extra_env = {"PUMICE_PURE": "1"} if pure else None
    procs, _, addr = start_local_cluster(root, conf, pythonpath=pythonpath, extra_env=extra_env)
    pid = procs[1].pid
    out: dict[str, float] = {}
    try:
        run_on_uvloop(_create_topic(addr, TOPIC, _client()))
        run_on_uvloop(_sends(addr, 1024, 1))  # the first file, its first pages, the code paths warm
        wait_idle([pid])
        for phase, fn in (
            ("single", lambda: _sends(addr, n, 1)),
            ("batch", lambda: _sends(addr, n, 64)),
            ("pull", lambda: _pull_all(addr)),
            ("wake", lambda: _wake(addr, min(n // 10, 10_000), 2000.0)),
        ):
            wait_idle([pid])
            before = cpu_seconds(pid)
            moved = run_on_uvloop(fn())
            out[phase] = 1e6 * (cpu_seconds(pid) - before) / max(moved, 1)
    finally:
        stop_all(procs, root)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--acl", action="store_true", help="also the plain build with aclEnable=true, requests signed")
    ap.add_argument("--tls", action="store_true", help="also the plain build with tlsMode=enforcing")
    ap.add_argument("--no-pure", action="store_true", help="leave out the PUMICE_PURE=1 session")
    args = ap.parse_args()
    builds: dict[str, str | None] = {"plain": None}
    if not args.no_pure:
        builds["pure"] = None
    if args.acl:
        builds["acl"] = None
    if args.tls:
        builds["tls"] = None
    figures: dict[str, dict[str, list[float]]] = {b: {p: [] for p in PHASES} for b in builds}
    for rep in range(args.reps):
        for build, path in builds.items():
            one = _one_session(args.messages, path, acl=build == "acl", tls=build == "tls", pure=build == "pure")
            print(f"rep {rep + 1} {build:<9}" + "".join(f" {p} {one[p]:6.1f}" for p in PHASES), flush=True)
            for p in PHASES:
                figures[build][p].append(one[p])
    print(f"\nbroker CPU µs per message, median (min–max) of {args.reps}, {args.messages:,} messages a phase")
    print("| build | " + " | ".join(PHASES) + " |")
    print("|---|" + "---|" * len(PHASES))
    for build in builds:
        cells = [f"{statistics.median(v):.1f} ({min(v):.1f}–{max(v):.1f})" for v in (figures[build][p] for p in PHASES)]
        print(f"| {build} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
