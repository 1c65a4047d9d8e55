"""Config files on a full disk (issue 30, point 4): a topic auto-created while topics.json cannot
be saved is never acknowledged into, the file is saved again once space is back (no restart),
and nothing acknowledged is lost to a SIGKILL; the name server's kvConfig.json likewise.

``test_topics_created_on_a_full_disk_survive_a_sigkill``, on a 256 MiB ext4 image
(``conftest.loop_disk``):

1. a 64 MiB ballast; a name server and a broker start (warmMapedFileEnable: a CommitLog file
   gets all its blocks when made, so appends into it need none), a warm-up send to FaultTopic;
2. every free block is taken (``squeeze``); N_TOPICS new topics get PER_TOPIC sends each, the
   first creating the topic from TBW102. topics.json cannot be saved: each send must be
   refused with a code and a remark naming the unsaved topic config (or, if a save landed
   after all, acknowledged); UPDATE_AND_CREATE_TOPIC is answered SYSTEM_ERROR, not SUCCESS.
   The broker logs the ENOSPC once, not once per send;
3. the space is freed: without a restart, topics.json on disk must list every topic within
   SAVE_WITHIN_S (the failed save retried); then PER_TOPIC more sends to each must succeed;
4. SIGKILL, restart: every acknowledged message is read back byte for byte, by msgId and by
   pull from its own topic.

``test_kv_config_saved_again_once_space_is_back``: a name server whose kvConfig.json is on the
image; PUT_KV_CONFIG on the full disk is answered SYSTEM_ERROR with a remark naming the file,
the value is saved once space is freed (no restart), and a restarted name server serves it.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from pumice.common.message_decoder import decode_message_id
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.response_code import ResponseCode
from tests.helpers.faults import (
    QUEUES,
    TRANSPORT_ERRORS,
    Ack,
    FaultCluster,
    LoopDisk,
    PumiceProcess,
    examples,
    send_request,
    verify,
)
from tests.helpers.ports import free_port

pytestmark = [pytest.mark.faults, pytest.mark.timeout(180)]

BALLAST_BYTES = 64 * 2**20
N_TOPICS = 12
PER_TOPIC = 2
SEND_TIMEOUT_S = 12.0
SAVE_WITHIN_S = 15.0  # the retry's back-off is at most 4 s, checked every second
UNSAVED_REMARK = "could not be saved"
ADMIN_TOPIC = "FullDiskAdminTopic"


def _send_round(c: FaultCluster, topics: list[str], tag: str) -> tuple[list[Ack], list[tuple[str, int, str]]]:
    """PER_TOPIC sends to each topic, in order; the acks, and every other answer as (key, code, remark)."""

    async def main() -> tuple[list[Ack], list[tuple[str, int, str]]]:
        client = RemotingClient()
        acked: list[Ack] = []
        other: list[tuple[str, int, str]] = []
        try:
            for topic in topics:
                for i in range(PER_TOPIC):
                    key, q = f"{tag}-{topic}-{i}", i % QUEUES
                    try:
                        r = await client.invoke(c.br, send_request(key, q, topic), timeout_s=SEND_TIMEOUT_S)
                    except TRANSPORT_ERRORS as e:
                        other.append((key, -1, f"no answer: {type(e).__name__}"))
                        continue
                    msg_id, qoff = r.ext_fields.get("msgId"), r.ext_fields.get("queueOffset")
                    if r.code == ResponseCode.SUCCESS and msg_id and qoff is not None:
                        acked.append(Ack(key, msg_id, int(r.ext_fields.get("queueId", q)), int(qoff),
                                         decode_message_id(msg_id)[1], topic))  # fmt: skip
                    else:
                        other.append((key, r.code, (r.remark or "").strip()))
            return acked, other
        finally:
            await client.close()

    return asyncio.run(main())


def _admin_create(c: FaultCluster, topic: str) -> RemotingCommand:
    """UPDATE_AND_CREATE_TOPIC (17): ``topic`` with QUEUES queues, perm 6."""
    fields = {"topic": topic, "readQueueNums": QUEUES, "writeQueueNums": QUEUES, "perm": 6,
              "topicFilterType": "SINGLE_TAG"}  # fmt: skip

    async def main() -> RemotingCommand:
        client = RemotingClient()
        try:
            return await client.invoke(c.br, RemotingCommand(code=17, ext_fields=fields), timeout_s=SEND_TIMEOUT_S)
        finally:
            await client.close()

    return asyncio.run(main())


def _topics_on_disk(c: FaultCluster) -> set[str]:
    """The topics in the broker's topics.json as it is on disk now (empty if unreadable)."""
    try:
        data = json.loads((c.store_root / "config" / "topics.json").read_bytes())
    except (OSError, ValueError):
        return set()
    return set(data.get("topicConfigTable") or {})


def _wait_for(check, within_s: float) -> float | None:  # type: ignore[no-untyped-def]
    """Seconds until ``check()`` is true, polled every 0.2 s; None if not within ``within_s``."""
    t0 = time.monotonic()
    for _ in range(int(within_s / 0.2) + 1):
        if check():
            return time.monotonic() - t0
        time.sleep(0.2)
    return None


def _fail_with(title: str, problems: list[str]) -> None:
    if problems:
        pytest.fail(f"{title} {len(problems)} problems:\n\n" + "\n\n".join(problems), pytrace=False)


def test_topics_created_on_a_full_disk_survive_a_sigkill(loop_disk: LoopDisk, fault_cluster) -> None:
    t_start = time.monotonic()
    disk = loop_disk
    disk.add_ballast(BALLAST_BYTES)
    # CommitLog files fully allocated when made (warmMapedFileEnable): appends go on when the
    # disk is full, the case where a topic's config cannot be saved but its message could be
    c: FaultCluster = fault_cluster("ASYNC_FLUSH", warmMapedFileEnable="true")
    warm, other = _send_round(c, ["FaultTopic"], "warm")
    assert len(warm) == PER_TOPIC, f"the warm-up sends failed on an empty disk: {other}; {c.broker_state()}"
    acked = list(warm)
    problems: list[str] = []

    # 2. the disk full to the last block: new topics cannot be saved. First the allocation of
    # the next CommitLog file ends (it would free its blocks when it fails on the full disk)
    commit_log = c.store_root / "commitlog"
    if _wait_for(lambda: len(list(commit_log.iterdir())) >= 2, 10.0) is None:
        print(f"  the next CommitLog file was not made within 10s: {sorted(p.name for p in commit_log.iterdir())}")
    squeezed = disk.squeeze()
    time.sleep(0.5)
    squeezed += disk.squeeze()
    print(f"\n  squeezed {squeezed / 2**20:.1f} MiB; disk {disk.describe()}")
    topics = [f"FullDiskTopic{i}" for i in range(N_TOPICS)]
    got, other = _send_round(c, topics, "full")
    acked += got
    unsaved = [(k, code, r) for k, code, r in other if code == ResponseCode.SYSTEM_ERROR and UNSAVED_REMARK in r]
    answers = examples([f"{k}: {code} {r!r}" for k, code, r in other])
    print(f"  on the full disk: {len(got)} SEND_OK, {len(unsaved)} refused as unsaved, "
          f"{len(other) - len(unsaved)} other answers {answers}")  # fmt: skip
    if not unsaved:
        not_held = sorted(set(topics) - _topics_on_disk(c))
        problems.append(f"on the full disk no send was refused for its unsaved topic config: {len(got)} SEND_OK; "
                        f"topics.json lacks {len(not_held)} of {N_TOPICS} topics ({examples(not_held)})")  # fmt: skip
    odd = [f"{k}: code {code} {r!r}" for k, code, r in other if (k, code, r) not in unsaved and (code == -1 or not r)]
    if odd:
        problems.append(f"on the full disk, answers with no remark or none at all: {examples(odd)}")
    if not c.broker.alive():
        _fail_with("[full disk]", [*problems, c.broker_state()])
    on_disk_full = _topics_on_disk(c) & set(topics)
    refused_topics = {k.split("-")[1] for k, _, _ in unsaved}
    if refused_topics & on_disk_full:
        problems.append(f"topics refused as unsaved are in topics.json: {sorted(refused_topics & on_disk_full)}")
    admin = _admin_create(c, ADMIN_TOPIC)
    if admin.code != ResponseCode.SYSTEM_ERROR or UNSAVED_REMARK not in (admin.remark or ""):
        problems.append(f"UPDATE_AND_CREATE_TOPIC on the full disk: code {admin.code} {admin.remark!r} "
                        f"(SYSTEM_ERROR saying the config could not be saved)")  # fmt: skip
    topics.append(ADMIN_TOPIC)  # from here on, like the others: saved once space is back, then sent to
    logged = sum("cannot persist" in line and "topics.json" in line for line in c.broker.lines)
    if logged > 1:
        problems.append(f"the unsaved topics.json was logged {logged} times (once per cause wanted)")

    # 3. space back: the failed save lands without a restart, and the topics take sends
    freed = disk.release()
    print(f"  freed {freed / 2**20:.1f} MiB; disk {disk.describe()}")
    took = _wait_for(lambda: set(topics) <= _topics_on_disk(c), SAVE_WITHIN_S)
    missing = sorted(set(topics) - _topics_on_disk(c))
    if took is None:
        problems.append(f"{SAVE_WITHIN_S:g}s after space was freed topics.json still lacks {len(missing)} of the "
                        f"{len(topics)} topics ({examples(missing)}): the failed save was not retried")  # fmt: skip
    else:
        print(f"  topics.json held every topic {took:.1f}s after space was freed")
    got, other = _send_round(c, topics, "after")
    acked += got
    if other:
        problems.append(f"after space was freed {len(other)} sends failed: "
                        f"{examples([f'{k}: {code} {r!r}' for k, code, r in other])}")  # fmt: skip

    # 4. SIGKILL and restart: everything acknowledged is there, in its topic
    c.broker.kill()
    why = c.start_broker()
    if why is not None:
        _fail_with("[full disk topics]", [*problems, f"restart after the SIGKILL: {why}"])
    lost = sorted({a.topic for a in acked} - _topics_on_disk(c))
    if lost:
        problems.append(f"after the SIGKILL, topics with acknowledged messages are not in topics.json: {lost}")
    problems += verify(c, acked, "after a SIGKILL and a restart")
    print(f"  {len(acked)} acknowledged, {time.monotonic() - t_start:.1f}s, {len(problems)} problems")
    _fail_with("[full disk topics]", problems)


def _kv_request(code: int, key: str, value: str | None = None) -> RemotingCommand:
    fields = {"namespace": "FULL_DISK", "key": key}
    if value is not None:
        fields["value"] = value
    return RemotingCommand(code=code, ext_fields=fields)


def test_kv_config_saved_again_once_space_is_back(loop_disk: LoopDisk, tmp_path: Path) -> None:
    disk = loop_disk
    port = free_port()
    kv_path = disk.mount / "namesrv" / "kvConfig.json"
    conf = tmp_path / "namesrv.conf"
    conf.write_text(f"listenPort={port}\nlistenHost=127.0.0.1\nkvConfigPath={kv_path}\n")
    addr = f"127.0.0.1:{port}"

    def start() -> PumiceProcess:
        p = PumiceProcess(["namesrv", "-c", str(conf)], "the name server", tmp_path / f"namesrv-{time.time_ns()}.log")
        why = p.wait_booted()
        assert why is None, f"{why}:\n{p.tail()}"
        return p

    async def invoke(req: RemotingCommand) -> RemotingCommand:
        client = RemotingClient()
        try:
            return await client.invoke(addr, req, timeout_s=10)
        finally:
            await client.close()

    def saved_values() -> dict[str, str]:
        try:
            return json.loads(kv_path.read_bytes())["configTable"].get("FULL_DISK", {})
        except (OSError, ValueError, KeyError):
            return {}

    problems: list[str] = []
    ns = start()
    try:
        r = asyncio.run(invoke(_kv_request(100, "before", "1")))
        assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
        disk.squeeze()
        r = asyncio.run(invoke(_kv_request(100, "full", "2")))
        if r.code != ResponseCode.SYSTEM_ERROR or "kvConfig.json" not in (r.remark or ""):
            problems.append(
                f"PUT_KV_CONFIG on the full disk: code {r.code} {r.remark!r} (SYSTEM_ERROR naming the file)"
            )
        if saved_values() != {"before": "1"}:
            problems.append(f"kvConfig.json on the full disk holds {saved_values()}")
        disk.release()
        took = _wait_for(lambda: saved_values() == {"before": "1", "full": "2"}, SAVE_WITHIN_S)
        if took is None:
            problems.append(f"kvConfig.json not saved again within {SAVE_WITHIN_S:g}s of space freed: {saved_values()}")
        else:
            print(f"\n  kvConfig.json saved {took:.1f}s after space was freed")
        assert ns.stop() == 0
        ns = start()
        r = asyncio.run(invoke(_kv_request(101, "full")))
        if r.code != ResponseCode.SUCCESS or r.ext_fields.get("value") != "2":
            problems.append(f"after a restart GET_KV_CONFIG: code {r.code} {r.remark!r} {r.ext_fields}")
    finally:
        if ns.stop() is None:
            ns.kill()
    _fail_with("[kvConfig.json on a full disk]", problems)
