"""A slave's side of its master: SlaveSynchronize's schedule and copies, and what the name
servers' registration answers tell it (BrokerController), on a controller that is not started."""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson
import pytest

from pumice.broker import slave_synchronize as slave_synchronize_module
from pumice.broker.broker_config import BrokerConfig, load_broker_config
from pumice.broker.broker_controller import BrokerController
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from pumice.store.message_store_config import BrokerRole
from tests.helpers.store import small_config


def slave_controller(tmp_path: Path, **broker: object) -> BrokerController:
    cfg = BrokerConfig(listen_host="127.0.0.1", listen_port=10911, broker_id=1, **broker)  # type: ignore[arg-type]
    return BrokerController(cfg, small_config(str(tmp_path / "store"), broker_role=BrokerRole.SLAVE))


class FakeMaster:
    """Answers every request with ``body`` (SUCCESS), or blocks in ``gate`` first."""

    def __init__(self, body: bytes, gate: asyncio.Event | None = None) -> None:
        self.body = body
        self.gate = gate
        self.calls: list[tuple[str, int]] = []

    async def invoke(self, addr: str, req: RemotingCommand, timeout_s: float = 3) -> RemotingCommand:
        self.calls.append((addr, req.code))
        if self.gate is not None:
            await self.gate.wait()
        return RemotingCommand(code=ResponseCode.SUCCESS, body=self.body, flag=1)

    async def close(self) -> None:
        pass


def answer(**fields: str) -> RemotingCommand:
    return RemotingCommand(code=ResponseCode.SUCCESS, ext_fields=dict(fields), flag=1)


@pytest.mark.parametrize("body", [b"[]", b"null", b'{"topicConfigTable": {"T": "x"}}', b"{not json"])
def test_odd_answers_from_the_master_fail_a_step_and_never_end_the_schedule(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: bytes
) -> None:
    monkeypatch.setattr(slave_synchronize_module, "INITIAL_DELAY_S", 0.0)
    monkeypatch.setattr(slave_synchronize_module, "PERIOD_S", 0.01)
    controller = slave_controller(tmp_path)
    sync = controller.slave_synchronize
    assert sync is not None
    sync.client = FakeMaster(body)  # type: ignore[assignment]
    sync.master_addr = "127.0.0.1:20911"

    async def main() -> None:
        task = asyncio.create_task(sync.run())
        await asyncio.sleep(0.3)
        assert not task.done(), task
        await sync.stop()
        await asyncio.wait_for(task, 2)

    asyncio.run(main())
    codes = [code for _, code in sync.client.calls]  # type: ignore[attr-defined]
    assert codes.count(RequestCode.GET_ALL_TOPIC_CONFIG) >= 3  # several rounds, each trying every step
    assert codes.count(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG) >= 3
    assert controller.topics.select_topic_config("T") is None  # nothing was taken from the bad answers


def test_stop_waits_for_the_step_under_way_and_ends_the_round(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slave_synchronize_module, "INITIAL_DELAY_S", 0.0)
    controller = slave_controller(tmp_path)
    sync = controller.slave_synchronize
    assert sync is not None
    gate = asyncio.Event()
    sync.client = FakeMaster(b"{}", gate)  # type: ignore[assignment]
    sync.master_addr = "127.0.0.1:20911"

    async def main() -> None:
        task = asyncio.create_task(sync.run())
        await asyncio.sleep(0.05)  # the round is waiting for the master's first answer
        stopping = asyncio.create_task(sync.stop())
        await asyncio.sleep(0.05)
        assert not stopping.done()
        gate.set()
        await asyncio.wait_for(stopping, 2)
        await asyncio.wait_for(task, 2)  # and no round after it

    asyncio.run(main())
    # the step under way finished; the round's three other steps (3 s each against a dead
    # master) were not started, so a stop never outlasts its wait
    assert len(sync.client.calls) == 1  # type: ignore[attr-defined]


def test_no_copy_when_this_broker_is_named_master(tmp_path: Path) -> None:
    controller = slave_controller(tmp_path)
    sync = controller.slave_synchronize
    assert sync is not None
    sync.client = FakeMaster(b"{}")  # type: ignore[assignment]
    sync.master_addr = controller.config.broker_addr
    asyncio.run(sync.sync_all())
    assert sync.client.calls == []  # type: ignore[attr-defined]
    sync.master_addr = "127.0.0.1:20911"
    asyncio.run(sync.sync_all())
    assert len(sync.client.calls) == 4  # type: ignore[attr-defined]


def test_taking_the_masters_topics_never_hides_one_the_master_has(tmp_path: Path) -> None:
    topics = slave_controller(tmp_path).topics
    for name in ("Kept", "Gone"):
        topics.create_topic_in_send_message_back_method(name, 1, 6)
    master = {name: {"topicName": name, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6} for name in ("Kept", "New")}
    data = orjson.loads(orjson.dumps({"topicConfigTable": master, "dataVersion": {"timestamp": 1, "counter": 9}}))
    real_decode = topics.decode
    seen_during: list[bool] = []

    def watched_decode(d: object) -> None:  # readers on the event loop take no lock
        seen_during.append(topics.select_topic_config("Kept") is not None)
        real_decode(d)
        seen_during.append(topics.select_topic_config("Kept") is not None)

    topics.decode = watched_decode  # type: ignore[method-assign]
    topics.take_master_copy(data, topics.topic_config_table)
    assert seen_during == [True, True]
    assert set(topics.topic_config_table) == {"Kept", "New"}
    assert topics.select_topic_config("Kept").read_queue_nums == 4  # type: ignore[union-attr]
    assert topics.data_version.counter == 9
    with pytest.raises((ValueError, TypeError, AttributeError)):
        topics.take_master_copy({"topicConfigTable": {"Bad": "x"}}, topics.topic_config_table)
    assert set(topics.topic_config_table) == {"Kept", "New"}  # bad data changes nothing


def test_the_master_address_follows_the_name_servers_answers(tmp_path: Path) -> None:
    controller = slave_controller(tmp_path)
    sync = controller.slave_synchronize
    assert sync is not None
    controller._on_register_results([answer(masterAddr="", haServerAddr=""),
                                     answer(masterAddr="10.0.0.1:10911", haServerAddr="10.0.0.1:10912")])  # fmt: skip
    assert sync.master_addr == "10.0.0.1:10911"  # a name server that has not seen the master does not unset it
    assert controller.store.ha_service is not None
    assert controller.store.ha_service.ha_client._master_address == "10.0.0.1:10912"
    controller._on_register_results([answer(masterAddr="", haServerAddr="")])
    assert sync.master_addr is None  # the master is gone: stop calling its old address


def test_a_fixed_ha_master_address_is_kept(tmp_path: Path) -> None:
    cfg = BrokerConfig(listen_host="127.0.0.1", broker_id=1)
    store_cfg = small_config(str(tmp_path / "store"), broker_role=BrokerRole.SLAVE, ha_master_address="10.9.9.9:10912")
    controller = BrokerController(cfg, store_cfg)
    controller.store.update_ha_master_address(store_cfg.ha_master_address)
    controller._on_register_results([answer(masterAddr="10.0.0.1:10911", haServerAddr="10.0.0.1:10912")])
    assert controller.store.ha_service is not None
    assert controller.store.ha_service.ha_client._master_address == "10.9.9.9:10912"
    assert controller.slave_synchronize is not None
    assert controller.slave_synchronize.master_addr == "10.0.0.1:10911"


def test_broker_ip2_is_the_published_ha_address(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerIP1=10.0.0.5\nbrokerIP2=10.1.0.5\nbrokerId=1\nbrokerRole=SLAVE\n"
                    f"storePathRootDir={tmp_path / 'store'}\nlistenPort=10911\n")  # fmt: skip
    broker_cfg, store_cfg = load_broker_config(str(conf))
    assert broker_cfg.broker_ip2 == "10.1.0.5"
    assert BrokerController(broker_cfg, store_cfg).ha_server_addr == "10.1.0.5:10912"
    broker_cfg.broker_ip2 = None
    assert BrokerController(broker_cfg, store_cfg).ha_server_addr == "10.0.0.5:10912"
