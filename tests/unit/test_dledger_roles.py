"""A DLedger node's roles (DLEDGER.md §5): brokerId -1 until the first role change; CANDIDATE and
FOLLOWER make a slave of id node number + 1 that refuses sends and admin writes and registers
as such; LEADER makes a SYNC_MASTER of id 0 once its committed entries are dispatched (not if
leadership is lost meanwhile), the queue offsets of its uncommitted entries counted, with the
schedule service and the transaction checker. A broker controller in process over a one-node
log (tests/helpers/one_node_log.py) and a name server in process, on loopback."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson

from pumice.broker.admin_broker_processor import SLAVE_REMARK
from pumice.broker.broker_config import BrokerConfig
from pumice.broker.broker_controller import BrokerController
from pumice.common.message import MessageExtBrokerInner
from pumice.namesrv.namesrv_config import NamesrvConfig
from pumice.namesrv.namesrv_controller import NamesrvController
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from pumice.store import BrokerRole
from tests.helpers.one_node_log import OneNodeLog
from tests.helpers.store import FILE_SIZE, small_config

HOST = (b"\x7f\x00\x00\x01", 10911)


def send_v2(body: bytes, topic: str = "RoleTopic") -> RemotingCommand:
    fields = {"a": "PG", "b": topic, "c": "TBW102", "d": 1, "e": 0, "f": 0, "g": 0, "h": 0, "i": ""}
    return RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, ext_fields=fields, body=body)


async def until(check: Any, what: str, timeout_s: float = 5.0) -> None:
    for _ in range(int(timeout_s / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"not {what} after {timeout_s} s")


def test_role_changes_make_a_slave_then_a_master(tmp_path: Path) -> None:
    async def main() -> None:
        ns = NamesrvController(NamesrvConfig(listen_port=0, listen_host="127.0.0.1",
                                             kv_config_path=str(tmp_path / "kv.json"),
                                             config_store_path=str(tmp_path / "ns.properties")))  # fmt: skip
        await ns.start()
        ns_addr = f"127.0.0.1:{ns.server.port}"
        peers = "n0-127.0.0.1:40911;n2-127.0.0.1:40913"
        store_cfg = small_config(str(tmp_path / "store"), enable_d_leger_commit_log=True, d_leger_group="RaftNode00",
                                 d_leger_peers=peers, d_leger_self_id="n2")  # fmt: skip
        log = OneNodeLog(str(tmp_path / "store"), FILE_SIZE, "n2", auto_commit=False)
        log.leader = False
        cfg = BrokerConfig(listen_host="127.0.0.1", listen_port=0, fast_listen_port_enable=False,
                           namesrv_addr=ns_addr, broker_name="RaftNode00",
                           broker_cluster_name="RaftCluster")  # fmt: skip
        broker = BrokerController(cfg, store_cfg, replicated_log=log)
        client = RemotingClient()
        try:
            assert broker.config.broker_id == -1 and broker.store.ha_service is None
            await broker.start()
            addr = f"127.0.0.1:{broker.server.port}"
            registered = broker.config.broker_addr  # listenPort 0: the name server lists port 0

            async def members() -> dict[str, str]:
                r = await client.invoke(ns_addr, RemotingCommand(code=RequestCode.GET_BROKER_CLUSTER_INFO), 3)
                table = orjson.loads(r.body)["brokerAddrTable"]
                return table.get("RaftNode00", {}).get("brokerAddrs", {})

            assert await members() == {}  # no registration before the first role change
            log.change_role(1, "CANDIDATE")
            await until(lambda: broker.role_change_handler.changes == 1, "a slave")  # type: ignore[union-attr]
            assert (broker.config.broker_id, broker.broker_role) == (3, BrokerRole.SLAVE)
            assert await members() == {"3": registered}
            assert broker.schedule_message_service is None and broker.slave_synchronize is not None
            r = await client.invoke(addr, send_v2(b"to a follower"), 5)
            assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE, (r.code, r.remark)
            fields = {"topic": "NewTopic", "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4,
                      "perm": 6, "topicFilterType": "SINGLE_TAG"}  # fmt: skip
            create = RemotingCommand(code=RequestCode.UPDATE_AND_CREATE_TOPIC, ext_fields=fields)
            r = await client.invoke(addr, create, 5)
            assert (r.code, r.remark) == (ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)

            # an entry of an earlier term that the old leader never saw committed
            log.leader, broker.store_config.broker_role = True, BrokerRole.SYNC_MASTER  # as in an earlier term
            m = MessageExtBrokerInner(topic="RoleTopic", body=b"old", queue_id=0, store_host=HOST, born_host=HOST)
            assert (await asyncio.to_thread(broker.store.put_messages, [m], False)).is_ok()
            log.leader, broker.store_config.broker_role = False, BrokerRole.SLAVE
            log.change_role(2, "LEADER")
            log.leader = False  # lost again before the handler ran: stays a slave
            handler = broker.role_change_handler
            assert handler is not None
            await until(lambda: handler.changes == 2, "the lost leadership handled")
            assert broker.broker_role is BrokerRole.SLAVE
            # a leader need not wait for it (Raft's rule commits it with the first entry of the
            # new term): it is master at once, and the entry's queue offset is taken
            log.change_role(3, "LEADER")
            await until(lambda: handler.changes == 3, "a master")
            assert broker.broker_role is BrokerRole.SYNC_MASTER and log.committed_index < log.ledger_end_index
            assert broker.config.broker_id == 0 and await members() == {"0": registered}
            assert broker.schedule_message_service is not None and broker.transaction_check_service is not None
            assert broker.slave_synchronize is None
            log.auto_commit = True
            r = await client.invoke(addr, send_v2(b"to the leader"), 5)
            assert r.code == ResponseCode.SUCCESS and r.ext_fields["queueOffset"] == "1", (r.code, r.remark)
            await until(lambda: broker.store.get_max_offset_in_queue("RoleTopic", 0) == 2, "both dispatched")
            cq = broker.store.get_consume_queue("RoleTopic", 0)
            assert cq is not None and cq.get_entry(0)[0] == 48 and cq.get_entry(1)[0] > 48  # type: ignore[index]
            # and back to follower
            log.change_role(4, "FOLLOWER")
            await until(lambda: handler.changes == 4, "a slave again")
            assert broker.broker_role is BrokerRole.SLAVE and broker.schedule_message_service is None
            assert await members() == {"3": registered}
        finally:
            await client.close()
            await broker.shutdown()
            await ns.shutdown()

    asyncio.run(main())
