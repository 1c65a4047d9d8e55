"""BrokerController: its own schedule, and how its processor pools let requests wait."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from pumice.broker.broker_config import BrokerConfig
from pumice.broker.broker_controller import BrokerController
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from pumice.store import BrokerRole, FlushDiskType
from tests.helpers.broker import loopback_controller, serving
from tests.helpers.fakes import FakeChannel
from tests.helpers.store import small_config


def test_a_periodic_job_that_fails_is_logged_and_runs_again(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The offset persist, consumer scan and stats jobs: one failure (e.g. an entry orjson
    cannot write) used to end the task for good, silently."""
    controller = BrokerController(BrokerConfig(listen_host="127.0.0.1", listen_port=10911), small_config(str(tmp_path)))
    runs: list[int] = []

    def job() -> None:
        runs.append(len(runs))
        if len(runs) == 1:
            raise TypeError("Dict integer key must be within 64-bit range")

    async def main() -> None:
        for in_thread in (False, True):
            runs.clear()
            task = asyncio.create_task(controller._periodic("persist consumer offsets", lambda: 0.01, job, in_thread))
            for _ in range(200):
                if len(runs) >= 3:
                    break
                await asyncio.sleep(0.01)
            task.cancel()
            assert len(runs) >= 3

    asyncio.run(main())
    assert "persist consumer offsets failed" in caplog.text and "64-bit range" in caplog.text


def send_v2(body: bytes, topic: str = "FlushTopic") -> RemotingCommand:
    fields = {"a": "PG", "b": topic, "c": "TBW102", "d": 1, "e": 0, "f": 0, "g": 0, "h": 0, "i": ""}
    return RemotingCommand(code=310, ext_fields=fields, body=body)


def test_sends_waiting_for_their_flush_do_not_hold_up_later_sends(tmp_path: Path) -> None:
    """SYNC_FLUSH: three sends in flight are all appended while the first still waits for
    its flush (the send pool had one slot, so each send waited for the previous one's disk
    round trip: 1,886 msg/s from 32 producers)."""
    controller = loopback_controller(tmp_path, flush_disk_type=FlushDiskType.SYNC_FLUSH)
    held: list[Callable[[bool], None]] = []

    async def main() -> None:
        await controller.start()
        controller.store.on_flushed = lambda result, callback: held.append(callback) is None  # type: ignore[method-assign]
        client = RemotingClient()
        addr = f"127.0.0.1:{controller.server.port}"
        try:
            sends = [asyncio.create_task(client.invoke(addr, send_v2(b"m%d" % i), timeout_s=10)) for i in range(3)]
            for _ in range(500):  # appended, and dispatched at the end of their loop turn
                if len(held) == 3 and controller.store.get_max_offset_in_queue("FlushTopic", 0) == 3:
                    break
                await asyncio.sleep(0.01)
            assert len(held) == 3  # all three appended and waiting for the disk together
            assert controller.store.get_max_offset_in_queue("FlushTopic", 0) == 3
            assert not any(s.done() for s in sends)
            for callback in held:
                callback(True)
            answers = await asyncio.gather(*sends)
            assert [(r.code, r.ext_fields["queueOffset"]) for r in answers] == [(0, "0"), (0, "1"), (0, "2")]
        finally:
            await client.close()
            await controller.shutdown()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_broker_permission_changes_live_and_reaches_the_name_servers(tmp_path: Path) -> None:
    """`mqadmin updateBrokerConfig -k brokerPermission -v 4`, the usual way to drain a broker:
    the registration publishes perm 4 for every topic with a new data version, so the name
    servers' routes stop sending producers here (the change was answered SUCCESS and did
    nothing). Meanwhile, as 4.9's msgCheck, sends are refused for order topics only."""
    controller = loopback_controller(tmp_path)

    async def main() -> None:
        async with serving(controller) as (client, addr):
            assert (await client.invoke(addr, send_v2(b"before"))).code == ResponseCode.SUCCESS
            ordered = {"topic": "OrderTopic", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6, "order": "true",
                       "topicFilterType": "SINGLE_TAG"}  # fmt: skip
            r = await client.invoke(addr, RemotingCommand(code=RequestCode.UPDATE_AND_CREATE_TOPIC, ext_fields=ordered))
            assert r.code == ResponseCode.SUCCESS
            version = controller.topics.data_version.to_json()
            r = await client.invoke(
                addr, RemotingCommand(code=RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=4")
            )
            assert r.code == ResponseCode.SUCCESS
            assert (await client.invoke(addr, send_v2(b"during"))).code == ResponseCode.SUCCESS
            r = await client.invoke(addr, send_v2(b"during", "OrderTopic"))
            assert (r.code, r.remark) == (
                ResponseCode.NO_PERMISSION,
                "the broker[127.0.0.1] sending message is forbidden",
            )
            assert controller.topics.data_version.to_json() != version
            register = orjson.loads(controller._register_request().body)
            table = register["topicConfigSerializeWrapper"]["topicConfigTable"]
            assert table["FlushTopic"]["perm"] == 4 and {tc["perm"] for tc in table.values()} == {4}
            r = await client.invoke(
                addr, RemotingCommand(code=RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerPermission=6")
            )
            assert (await client.invoke(addr, send_v2(b"after"))).code == ResponseCode.SUCCESS
            assert (await client.invoke(addr, send_v2(b"after", "OrderTopic"))).code == ResponseCode.SUCCESS
            register = orjson.loads(controller._register_request().body)
            assert register["topicConfigSerializeWrapper"]["topicConfigTable"]["FlushTopic"]["perm"] == 6

    asyncio.run(asyncio.wait_for(main(), 30))


@pytest.mark.parametrize(
    ("store_settings", "hook", "code"),
    [
        ({"flush_disk_type": FlushDiskType.SYNC_FLUSH}, "on_flushed", ResponseCode.FLUSH_DISK_TIMEOUT),
        ({"broker_role": BrokerRole.SYNC_MASTER}, "on_replicated", ResponseCode.FLUSH_SLAVE_TIMEOUT),
    ],
    ids=["disk", "slave"],
)
def test_a_send_whose_flush_or_slave_never_answers_gets_the_timeout_code_and_its_msg_id(
    tmp_path: Path, store_settings: dict[str, object], hook: str, code: ResponseCode
) -> None:
    """After syncFlushTimeout the producer hears FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT, with
    the msgId and queue offset of the message, which is stored (the Java client counts it sent)."""
    controller = loopback_controller(tmp_path, sync_flush_timeout=200, **store_settings)

    async def main() -> None:
        await controller.start()
        setattr(controller.store, hook, lambda result, callback: True)  # waits, and never calls back
        client = RemotingClient()
        try:
            r = await client.invoke(f"127.0.0.1:{controller.server.port}", send_v2(b"slow"), timeout_s=10)
            assert r.code == code
            assert r.ext_fields["queueOffset"] == "0" and len(r.ext_fields["msgId"]) == 32
            assert controller.store.get_max_offset_in_queue("FlushTopic", 0) == 1
        finally:
            await client.close()
            await controller.shutdown()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_a_heartbeat_creates_its_groups_retry_topics_in_one_save_and_bad_shapes_change_nothing(
    tmp_path: Path,
) -> None:
    """A heartbeat naming many groups: their subscription groups and %RETRY% topics are created
    together, with one save of subscriptionGroup.json and one of topics.json (4,000 groups took
    14 s, one save each, with the loop held); a body with a malformed consumer entry is refused
    before anything is registered or created."""
    controller = loopback_controller(tmp_path)

    def heartbeat(consumers: list[object]) -> RemotingCommand:
        return RemotingCommand(
            code=RequestCode.HEART_BEAT, body=orjson.dumps({"clientID": "c1", "consumerDataSet": consumers})
        )

    async def main() -> None:
        async with serving(controller) as (client, addr):
            saves: list[int] = []
            persist = controller.topics.persist
            controller.topics.persist = lambda: (saves.append(1), persist())[1]  # type: ignore[method-assign]
            group_saves: list[int] = []
            persist_groups = controller.subscription_groups.persist
            controller.subscription_groups.persist = (  # type: ignore[method-assign]
                lambda: (group_saves.append(1), persist_groups())[1]
            )
            groups = [
                {"groupName": f"G{i}", "subscriptionDataSet": [{"topic": "T", "subString": "*"}]} for i in range(300)
            ]
            r = await client.invoke(addr, heartbeat(groups))
            assert r.code == ResponseCode.SUCCESS
            assert len(saves) == 1 and len(group_saves) == 1
            on_disk = orjson.loads((tmp_path / "config" / "topics.json").read_bytes())["topicConfigTable"]
            assert {f"%RETRY%G{i}" for i in range(300)} <= set(on_disk)
            groups_on_disk = orjson.loads((tmp_path / "config" / "subscriptionGroup.json").read_bytes())
            assert {f"G{i}" for i in range(300)} <= set(groups_on_disk["subscriptionGroupTable"])
            assert controller.consumers.get_consumer_group_info("G299") is not None
            assert (await client.invoke(addr, heartbeat(groups))).code == ResponseCode.SUCCESS
            assert len(saves) == 1 and len(group_saves) == 1  # nothing missing: no save
            for bad, remark in [
                ([{"groupName": "NEW1"}, ["x"]], "consumerDataSet[1] is not a JSON object"),
                ([{"groupName": "NEW1"}, {"groupName": ["HB2"]}], "consumerDataSet[1] has no groupName string"),
                ([{"groupName": "NEW1", "subscriptionDataSet": [{"topic": "T", "subString": None}]}],
                 "consumerDataSet[0].subscriptionDataSet: each entry needs a topic and a subString string"),
                ([{"groupName": "NEW1", "subscriptionDataSet": "T"}], "subscriptionDataSet"),
            ]:  # fmt: skip
                r = await client.invoke(addr, heartbeat(bad))
                assert r.code == ResponseCode.SYSTEM_ERROR and remark in (r.remark or ""), (bad, r.remark)
            assert controller.consumers.get_consumer_group_info("NEW1") is None
            assert controller.topics.select_topic_config("%RETRY%NEW1") is None and len(saves) == 1
            assert "NEW1" not in controller.subscription_groups.subscription_group_table and len(group_saves) == 1

    asyncio.run(asyncio.wait_for(main(), 30))


def test_a_heartbeat_uses_its_subscription_groups_retry_queue_nums_and_notify_switch(tmp_path: Path) -> None:
    """As 4.9's heartBeat: the retry topic takes the subscription group's retryQueueNums (it was
    always 1) and a unit-mode consumer's gets the unit-sub flag; a group with
    notifyConsumerIdsChangedEnable false is not told of members joining or unregistering, nor is
    any group when the broker's switch is off; with autoCreateSubscriptionGroup false an unknown
    group gets neither a subscription group nor a retry topic, and is still registered."""
    controller = loopback_controller(tmp_path)

    def heartbeat(client_id: str, group: str, unit_mode: bool = False) -> RemotingCommand:
        consumer = {
            "groupName": group,
            "unitMode": unit_mode,
            "subscriptionDataSet": [{"topic": "T", "subString": "*"}],
        }
        body = {"clientID": client_id, "consumerDataSet": [consumer]}
        return RemotingCommand(code=RequestCode.HEART_BEAT, body=orjson.dumps(body))

    async def notifications(client: RemotingClient, addr: str, request: RemotingCommand) -> list[str]:
        """The groups whose NOTIFY_CONSUMER_IDS_CHANGED reached ``client`` after ``request``."""
        heard: list[str] = []
        client.on_request = lambda _addr, cmd: (
            heard.append(cmd.ext_fields["consumerGroup"])
            if cmd.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED
            else None
        )
        assert (await client.invoke(addr, request)).code == ResponseCode.SUCCESS
        await asyncio.sleep(0.3)
        return heard

    async def main() -> None:
        async with serving(controller) as (client, addr):
            quiet = {"groupName": "Quiet", "retryQueueNums": 3, "notifyConsumerIdsChangedEnable": False}
            r = await client.invoke(addr, RemotingCommand(code=200, body=orjson.dumps(quiet)))
            assert r.code == ResponseCode.SUCCESS
            assert (await client.invoke(addr, heartbeat("a", "Quiet"))).code == ResponseCode.SUCCESS
            tc = controller.topics.select_topic_config("%RETRY%Quiet")
            assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm, tc.topic_sys_flag) == (3, 3, 6, 0)
            assert (await client.invoke(addr, heartbeat("a", "Unit", unit_mode=True))).code == ResponseCode.SUCCESS
            tc = controller.topics.select_topic_config("%RETRY%Unit")
            assert (tc.read_queue_nums, tc.topic_sys_flag) == (1, 2)
            assert controller.subscription_groups.subscription_group_table["Unit"].retry_queue_nums == 1

            other = RemotingClient()
            try:
                # a second member joins each group: only the group that wants it hears
                assert await notifications(other, addr, heartbeat("a2", "Unit")) == ["Unit"]
                assert await notifications(other, addr, heartbeat("a2", "Quiet")) == []
                unregister = {"clientID": "a2", "consumerGroup": "Quiet"}
                gone = RemotingCommand(code=RequestCode.UNREGISTER_CLIENT, ext_fields=unregister)
                assert await notifications(client, addr, gone) == []
                assert controller.consumers.get_consumer_ids("Quiet") == ["a"]
                r = await client.invoke(
                    addr,
                    RemotingCommand(
                        code=RequestCode.UPDATE_BROKER_CONFIG,
                        body=b"notifyConsumerIdsChangedEnable=false\nautoCreateSubscriptionGroup=false",
                    ),
                )
                assert r.code == ResponseCode.SUCCESS, r.remark
                assert await notifications(other, addr, heartbeat("a3", "Unit")) == []
                assert (await client.invoke(addr, heartbeat("a", "Unknown"))).code == ResponseCode.SUCCESS
                assert controller.consumers.get_consumer_ids("Unknown") == ["a"]
                assert "Unknown" not in controller.subscription_groups.subscription_group_table
                assert controller.topics.select_topic_config("%RETRY%Unknown") is None
            finally:
                await other.close()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_get_all_delay_offset_answers_the_table_in_memory(tmp_path: Path) -> None:
    """It answered the file's bytes: up to 10 s stale on a master, and garbage when the file
    was corrupt (a slave's SlaveSynchronize then failed on it every round)."""
    controller = loopback_controller(tmp_path)

    async def main() -> None:
        async with serving(controller) as (client, addr):
            r = await client.invoke(addr, RemotingCommand(code=RequestCode.GET_ALL_DELAY_OFFSET))
            assert (r.code, orjson.loads(r.body)) == (ResponseCode.SUCCESS, {"offsetTable": {}})  # fresh: no file yet
            assert controller.schedule_message_service is not None
            controller.schedule_message_service.offset_table[3] = 7
            (tmp_path / "config" / "delayOffset.json").write_bytes(b"{{")
            r = await client.invoke(addr, RemotingCommand(code=RequestCode.GET_ALL_DELAY_OFFSET))
            assert (r.code, orjson.loads(r.body)) == (ResponseCode.SUCCESS, {"offsetTable": {"3": 7}})

    asyncio.run(asyncio.wait_for(main(), 30))


def test_an_unreadable_delay_offset_file_stops_the_start_and_is_left_as_it_was(tmp_path: Path) -> None:
    controller = loopback_controller(tmp_path)
    path = tmp_path / "config" / "delayOffset.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"{{")

    async def main() -> None:
        with pytest.raises(RuntimeError, match=r"delayOffset\.json nor its \.bak"):
            await controller.start()
        await controller.shutdown()

    asyncio.run(asyncio.wait_for(main(), 30))
    assert path.read_bytes() == b"{{" and not (tmp_path / "config" / "delayOffset.json.bak").exists()


def test_producers_from_heartbeats_are_listed_and_leave_on_unregister_close_or_silence(tmp_path: Path) -> None:
    """ProducerManager: GET_PRODUCER_CONNECTION_LIST (mqadmin producerConnection) answered
    REQUEST_CODE_NOT_SUPPORTED, and heartbeats' producerDataSet were dropped."""
    controller = loopback_controller(tmp_path)

    def heartbeat(client_id: str, producers: object) -> RemotingCommand:
        body = {"clientID": client_id, "producerDataSet": producers, "consumerDataSet": []}
        return RemotingCommand(code=RequestCode.HEART_BEAT, language="PYTHON", version=395, body=orjson.dumps(body))

    def connections(group: str) -> RemotingCommand:
        return RemotingCommand(code=RequestCode.GET_PRODUCER_CONNECTION_LIST, ext_fields={"producerGroup": group})

    async def main() -> None:
        async with serving(controller) as (client, addr):
            other = RemotingClient()  # a second connection: a second member
            try:
                hb = [{"groupName": "PG"}, {"groupName": "CLIENT_INNER_PRODUCER"}]
                assert (await client.invoke(addr, heartbeat("c1", hb))).code == ResponseCode.SUCCESS
                assert (await other.invoke(addr, heartbeat("c2", [{"groupName": "PG"}]))).code == ResponseCode.SUCCESS
                r = await client.invoke(addr, connections("PG"))
                assert r.code == ResponseCode.SUCCESS
                got = orjson.loads(r.body)["connectionSet"]
                assert [(c["clientId"], c["language"], c["version"]) for c in got] == [
                    ("c1", "PYTHON", 395),
                    ("c2", "PYTHON", 395),
                ]
                assert all(c["clientAddr"].startswith("127.0.0.1:") for c in got)
                # GET_ALL_PRODUCER_INFO (328): every group's members, as 4.9's ProducerTableInfo
                r = await client.invoke(addr, RemotingCommand(code=RequestCode.GET_ALL_PRODUCER_INFO))
                assert r.code == ResponseCode.SUCCESS
                table = orjson.loads(r.body)["data"]
                assert sorted(table) == ["CLIENT_INNER_PRODUCER", "PG"]
                assert [(p["clientId"], p["language"], p["version"]) for p in table["PG"]] == [
                    ("c1", "PYTHON", 395),
                    ("c2", "PYTHON", 395),
                ]
                assert all(p["remoteIP"].startswith("/127.0.0.1:") for p in table["PG"])
                assert all(abs(p["lastUpdateTimestamp"] / 1000 - time.time()) < 30 for p in table["PG"])
                # UNREGISTER_CLIENT with the producer group
                unreg = RemotingCommand(
                    code=RequestCode.UNREGISTER_CLIENT, ext_fields={"clientID": "c1", "producerGroup": "PG"}
                )
                assert (await client.invoke(addr, unreg)).code == ResponseCode.SUCCESS
                r = await client.invoke(addr, connections("PG"))
                assert [c["clientId"] for c in orjson.loads(r.body)["connectionSet"]] == ["c2"]
                # a closed connection leaves at once
                await other.close()
                for _ in range(100):
                    r = await client.invoke(addr, connections("PG"))
                    if r.code != ResponseCode.SUCCESS:
                        break
                    await asyncio.sleep(0.02)
                assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, "the producer group[PG] not exist")
                # silent for 120 s: dropped, and its connection closed
                info = controller.producers.group_channel_table["CLIENT_INNER_PRODUCER"]
                for member in info.values():
                    member.last_update -= 121
                controller._scan_not_active_channels()
                assert "CLIENT_INNER_PRODUCER" not in controller.producers.group_channel_table
                # a malformed producerDataSet refuses the heartbeat
                for bad in ([{"groupName": 5}], "PG", [None]):
                    r = await other.invoke(addr, heartbeat("c3", bad))
                    assert r.code == ResponseCode.SYSTEM_ERROR and "producerDataSet" in (r.remark or "")
            finally:
                await other.close()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_a_topic_created_off_the_loop_wakes_the_register_loop_thread_safely(tmp_path: Path) -> None:
    """A heartbeat's retry topics are created in asyncio.to_thread, whose topic-created hook set
    the register loop's asyncio.Event from that thread (in debug mode: "Non-thread-safe
    operation"; under uvloop a data race, and the loop could miss the wake-up)."""
    controller = loopback_controller(tmp_path)
    woken: list[bool] = []

    async def main() -> None:
        async with serving(controller) as (client, addr):
            assert controller._register_soon is not None
            waiter = asyncio.create_task(controller._register_soon.wait())
            await asyncio.sleep(0)
            body = {"clientID": "c1", "consumerDataSet": [{"groupName": "NewGroup", "subscriptionDataSet": []}]}
            r = await client.invoke(addr, RemotingCommand(code=RequestCode.HEART_BEAT, body=orjson.dumps(body)))
            assert r.code == ResponseCode.SUCCESS, r.remark
            woken.append(await asyncio.wait_for(waiter, 5))

    asyncio.run(asyncio.wait_for(main(), 30), debug=True)
    assert woken == [True]


def test_a_heartbeat_whose_connection_closed_meanwhile_registers_nothing(tmp_path: Path) -> None:
    """It awaits the retry topics' creation; a connection that closed during that wait (its
    close event already run) was registered anyway, a phantom member for 120 s."""
    from pumice.broker.client_manage_processor import ClientManageProcessor
    from pumice.broker.consumer_manager import ConsumerManager

    channel = FakeChannel("127.0.0.1:1")

    async def create(groups: list[tuple[str, bool]]) -> dict[str, bool]:
        channel.closed = True  # the client went away while the topics were being made
        return {}

    consumers = ConsumerManager()
    proc = ClientManageProcessor(consumers, create)
    body = {"clientID": "ghost", "consumerDataSet": [{"groupName": "GZ"}], "producerDataSet": [{"groupName": "PZ"}]}
    r = asyncio.run(
        proc.process_request(channel, RemotingCommand(code=RequestCode.HEART_BEAT, body=orjson.dumps(body)))
    )  # type: ignore[arg-type]
    assert r.code == ResponseCode.SUCCESS
    assert consumers.get_consumer_group_info("GZ") is None and proc.producers.connections("PZ") is None


def test_shutdown_ends_when_a_registration_is_asked_for_just_as_it_begins(tmp_path: Path) -> None:
    """The register loop woken (a topic created) in the loop turn its cancel comes: on Python
    3.11, asyncio.wait_for returned the wake-up and dropped the cancel, and shutdown waited for
    the loop for ever (the broker ignored SIGTERM; CI's teardown killed it after 20 s)."""
    controller = loopback_controller(tmp_path)

    async def main() -> float:
        await controller.start()
        assert controller._register_soon is not None
        task = next(t for t in controller._tasks if t.get_coro().__qualname__.endswith("_register_loop"))
        await asyncio.sleep(0.05)  # parked on the event
        controller._register_soon.set()
        await asyncio.sleep(0)  # the event's waiter is done; the register loop has not run yet
        task.cancel()
        t0 = time.monotonic()
        async with asyncio.timeout(15):
            await controller.shutdown()
        return time.monotonic() - t0

    assert asyncio.run(main()) < 10
