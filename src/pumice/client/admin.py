"""Admin operations: ``AsyncMQAdmin`` (asyncio) and ``MQAdmin`` (blocking twin).

Results are the plain types of ``admin_types`` (each with ``to_dict()``), route types of
``route`` or ``MessageExt``, ready for a CLI. What each call asks whom:

==========================  ===============================================================
call                        requests
==========================  ===============================================================
create_topic                UPDATE_AND_CREATE_TOPIC to one broker, or to every master of a
                            cluster (GET_BROKER_CLUSTER_INFO)
delete_topic                DELETE_TOPIC_IN_BROKER to every master of the cluster (or of the
                            topic's route), then DELETE_TOPIC_IN_NAMESRV to every name server
topic_list / topic_route    GET_ALL_TOPIC_LIST_FROM_NAMESERVER / GET_ROUTEINFO_BY_TOPIC
topic_status                GET_TOPIC_STATS_INFO to each broker of the route
cluster_list                GET_BROKER_CLUSTER_INFO, then GET_BROKER_RUNTIME_INFO per broker
broker_status               GET_BROKER_RUNTIME_INFO
delete_expired_commit_log   DELETE_EXPIRED_COMMITLOG to one broker or every master of a cluster
consumer_progress           GET_CONSUME_STATS to each broker of the topic's route (no topic:
                            of ``%RETRY%<group>``'s route, else every master); lag =
                            broker offset − consumer offset
consumer_connection         GET_CONSUMER_CONNECTION_LIST (first broker that knows the group)
update_subscription_group   UPDATE_AND_CREATE_SUBSCRIPTIONGROUP to one broker or a cluster
query_msg_by_id             an offset msgId: VIEW_MESSAGE_BY_ID to the broker it names
                            (address and CommitLog offset are inside the id); otherwise, with
                            a topic, the id is taken as a UNIQ_KEY: QUERY_MESSAGE with
                            _UNIQUE_KEY_QUERY on every broker of the topic
query_msg_by_key            QUERY_MESSAGE on every broker of the topic, merged, newest first
query_msg_by_offset         PULL_MESSAGE of one message at a queue offset (group TOOLS_CONSUMER)
reset_offset_by_time        INVOKE_BROKER_TO_RESET_OFFSET to each broker of the route (the
                            broker tells the online members: RESET_CONSUMER_CLIENT_OFFSET)
reset_offset_by_time_old    (no member online) GET_CONSUME_STATS, else GET_TOPIC_STATS_INFO,
                            per broker; SEARCH_OFFSET_BY_TIMESTAMP (or GET_MAX_OFFSET) and
                            UPDATE_CONSUMER_OFFSET per queue
update_topic_perm           GET_ROUTEINFO_BY_TOPIC, then UPDATE_AND_CREATE_TOPIC with the new
                            perm (queue numbers and sys flag kept) to one master or a cluster's
topic_cluster_list          GET_ROUTEINFO_BY_TOPIC and GET_BROKER_CLUSTER_INFO
get_broker_config           GET_BROKER_CONFIG (the broker's properties, in its order)
update_broker_config        UPDATE_BROKER_CONFIG (a ``key=value`` properties body)
delete_subscription_group   DELETE_SUBSCRIPTIONGROUP (groupName, removeOffset)
wipe_write_perm /           WIPE_WRITE_PERM_OF_BROKER / ADD_WRITE_PERM_OF_BROKER to every name
add_write_perm              server: the count of topics changed on each
consumer_running_info       GET_CONSUMER_RUNNING_INFO (relayed by the broker to the client)
queue_owners                GET_CONSUMER_CONNECTION_LIST, then each client's running info:
                            which client holds which queue
clone_group_offset          GET_CONSUME_STATS of the source group, then UPDATE_CONSUMER_OFFSET
                            of each queue for the destination group
topic_consumed_by           QUERY_TOPIC_CONSUME_BY_WHO
broker_stats_data           VIEW_BROKER_STATS_DATA (statsName, statsKey)
get_namesrv_config /        GET_NAMESRV_CONFIG / UPDATE_NAMESRV_CONFIG (a properties body) to
update_namesrv_config       each name server
put_kv_config /             PUT_KV_CONFIG / DELETE_KV_CONFIG to every name server;
delete_kv_config /          GET_KV_CONFIG of one (None on QUERY_NOT_FOUND)
get_kv_config
subscription_groups         GET_ALL_SUBSCRIPTIONGROUP_CONFIG (user_subscription_groups: but the
                            system groups)
user_topic_configs          GET_ALL_TOPIC_CONFIG but GET_SYSTEM_TOPIC_LIST_FROM_BROKER's topics
                            (and the %RETRY%/%DLQ% ones unless asked)
broker_consume_stats        GET_BROKER_CONSUME_STATS (isOrder)
producer_info               GET_ALL_PRODUCER_INFO
query_consume_queue         QUERY_CONSUME_QUEUE (topic, queueId, index, count, consumerGroup)
clean_expired_consume_queue CLEAN_EXPIRED_CONSUMEQUEUE / CLEAN_UNUSED_TOPIC to one broker, a
/ clean_unused_topic        cluster's masters or every master
==========================  ===============================================================

"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from pumice.client.admin_types import (
    BrokerInfo,
    Connection,
    ConsumerConnection,
    ConsumerProgress,
    QueueProgress,
    QueueStatus,
    RollbackStats,
    SubscriptionGroupConfig,
)
from pumice.client.client_instance import MQClientInstance, own_instance
from pumice.client.exceptions import MQBrokerError, MQClientError
from pumice.client.message import MessageExt, MessageQueue, PullStatus
from pumice.client.mq_client_api import PULL_FLAG_SUBSCRIPTION, MQClientAPIImpl
from pumice.client.pull_consumer import process_pull_result
from pumice.client.route import ClusterInfo, TopicRouteData
from pumice.client.subscription import build_subscription
from pumice.client.sync_loop import SyncClient
from pumice.common import fastjson, mix_all
from pumice.common.message_decoder import decode_message_id
from pumice.common.mix_all import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    TOOLS_CONSUMER_GROUP,
    is_sys_consumer_group,
)
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode

# the groups DefaultMQAdminExt's getUserSubscriptionGroup leaves out (its SYSTEM_GROUP_SET)
SYSTEM_GROUPS = frozenset({
    mix_all.DEFAULT_CONSUMER_GROUP, mix_all.DEFAULT_PRODUCER_GROUP, mix_all.TOOLS_CONSUMER_GROUP,
    mix_all.FILTERSRV_CONSUMER_GROUP, "__MONITOR_CONSUMER", mix_all.CLIENT_INNER_PRODUCER_GROUP,
    "SELF_TEST_P_GROUP", mix_all.SELF_TEST_CONSUMER_GROUP, mix_all.ONS_HTTP_PROXY_GROUP,
    mix_all.CID_ONSAPI_PERMISSION_GROUP, mix_all.CID_ONSAPI_OWNER_GROUP, mix_all.CID_ONSAPI_PULL_GROUP,
    mix_all.CID_SYS_RMQ_TRANS,
})  # fmt: skip


def json_body(body: bytes | bytearray | memoryview) -> dict[str, Any]:
    """A JSON object body; fastjson's object map keys (MessageQueue keys, ``{{"brokerName":..}:..}``)
    become strings holding the key object's JSON (``fastjson.ObjectKey``), as quoted ones are."""
    raw = bytes(body)
    if not raw:
        return {}
    try:
        data = fastjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise MQClientError(f"the answer's body is not JSON: {e}") from None
    return dict(data) if isinstance(data, dict) else {}


def offset_msg_id_addr(msg_id: str) -> tuple[str, int] | None:
    """(broker address, CommitLog offset) inside an offset msgId, or None if it is not one."""
    try:
        (host, port), offset = decode_message_id(msg_id)
    except ValueError:
        return None
    if not 0 < port < 65536 or offset < 0:
        return None
    if len(host) == 4:
        return f"{socket.inet_ntoa(host)}:{port}", offset
    return f"[{socket.inet_ntop(socket.AF_INET6, host)}]:{port}", offset


def properties_body(body: bytes | bytearray | memoryview) -> dict[str, str]:
    """A Java properties body (``key=value`` lines), in its order."""
    out: dict[str, str] = {}
    for line in bytes(body).decode("utf-8", "replace").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


class AsyncMQAdmin:
    def __init__(
        self,
        namesrv_addr: str = "127.0.0.1:9876",
        *,
        client_instance: MQClientInstance | None = None,
        timeout_s: float = 5.0,
        access_key: str | None = None,
        secret_key: str | None = None,
        use_tls: bool | ssl.SSLContext = False,
    ) -> None:
        self._owns_instance = client_instance is None
        self.instance = own_instance(
            client_instance,
            namesrv_addr,
            instance_name="admin",
            timeout_s=timeout_s,
            access_key=access_key,
            secret_key=secret_key,
            use_tls=use_tls,
        )
        self.started = False

    @property
    def api(self) -> MQClientAPIImpl:
        return self.instance.api

    async def start(self) -> None:
        if not self.started:
            await self.instance.start()
            self.started = True

    async def shutdown(self) -> None:
        if self.started and self._owns_instance:
            await self.instance.shutdown()
        self.started = False

    async def __aenter__(self) -> AsyncMQAdmin:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    # -- helpers ----------------------------------------------------------------------------

    async def cluster_info(self) -> ClusterInfo:
        return await self.instance.namesrv_call(self.api.get_broker_cluster_info)  # type: ignore[no-any-return]

    async def known_cluster_info(self, cluster: str) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO; MQClientError when the name server does not know ``cluster``."""
        info = await self.cluster_info()
        if cluster not in info.cluster_addr_table:
            raise MQClientError(f"the cluster {cluster!r} is unknown to the name server")
        return info

    async def _targets(self, cluster: str | None, broker_addr: str | None) -> list[str]:
        if broker_addr:
            return [broker_addr]
        if not cluster:
            raise MQClientError("name a cluster or a broker address")
        info = await self.known_cluster_info(cluster)
        addrs = info.master_addrs(cluster)
        if not addrs:
            raise MQClientError(f"the cluster {cluster!r} has no master broker")
        return addrs

    async def targets(self, cluster: str | None, broker_addr: str | None) -> list[str]:
        """``[broker_addr]``, or every master of ``cluster`` (MQClientError for an unknown cluster)."""
        return await self._targets(cluster, broker_addr)

    async def _route_masters(self, topic: str) -> list[tuple[str, str]]:
        """(broker name, master address) of every broker of ``topic``'s route."""
        route = await self.topic_route(topic)
        return [(b.broker_name, b.master_addr) for b in route.broker_datas if b.master_addr]

    # -- topics -----------------------------------------------------------------------------

    async def create_topic(
        self,
        topic: str,
        *,
        cluster: str | None = None,
        broker_addr: str | None = None,
        read_queue_nums: int = 8,
        write_queue_nums: int = 8,
        perm: int = 6,
        order: bool = False,
        topic_sys_flag: int = 0,
    ) -> list[str]:
        """Create or update ``topic`` on one broker or every master of ``cluster``; the
        addresses done."""
        addrs = await self._targets(cluster, broker_addr)
        for addr in addrs:
            await self.api.update_and_create_topic(
                addr, topic, read_queue_nums, write_queue_nums, perm, order, topic_sys_flag=topic_sys_flag
            )
        return addrs

    async def delete_topic(self, topic: str, cluster: str | None = None) -> list[str]:
        """Delete ``topic`` from the brokers (the cluster's masters, or its route's) and from
        every name server; the broker addresses done."""
        if cluster:
            addrs = await self._targets(cluster, None)
        else:
            addrs = [a for _, a in await self._route_masters(topic)]
        for addr in addrs:
            await self.api.delete_topic_in_broker(addr, topic)
        for ns in self.instance.namesrv_addrs:
            await self.api.delete_topic_in_name_server(ns, topic)
        self.instance.topic_routes.pop(topic, None)
        return addrs

    async def topic_list(self) -> list[str]:
        return await self.instance.namesrv_call(self.api.get_topic_list_from_name_server)  # type: ignore[no-any-return]

    async def topic_route(self, topic: str) -> TopicRouteData:
        return await self.instance.update_topic_route(topic)

    async def topic_status(self, topic: str) -> list[QueueStatus]:
        out = []
        for _, addr in await self._route_masters(topic):
            for mq, t in (await self.api.get_topic_stats_info(addr, topic)).items():
                out.append(QueueStatus(mq, t.min_offset, t.max_offset, t.last_update_timestamp))
        return sorted(out, key=lambda q: q.mq)

    # -- brokers ----------------------------------------------------------------------------

    async def broker_status(self, broker_addr: str) -> dict[str, str]:
        return await self.api.get_broker_runtime_info(broker_addr)

    async def delete_expired_commit_log(
        self, cluster: str | None = None, broker_addr: str | None = None
    ) -> dict[str, str | None]:
        """Ask one broker, or every master of a cluster, to delete its expired CommitLog files
        now; broker address → None when it accepted, else the error. A single broker's
        error is raised."""
        return await self._each(cluster, broker_addr, self.api.delete_expired_commit_log)

    # -- ACL ----------------------------------------------------------------------------------------

    async def _each(
        self,
        cluster: str | None,
        broker_addr: str | None,
        call: Callable[[str], Awaitable[Any]],
        every_cluster: bool = False,
    ) -> dict[str, str | None]:
        """``call(addr)`` on one broker or every master of a cluster (``every_cluster``: of every
        cluster when neither is named): address → None, or the error (a single broker's error
        is raised)."""
        out: dict[str, str | None] = {}
        if every_cluster and not cluster and not broker_addr:
            addrs = (await self.cluster_info()).master_addrs()
        else:
            addrs = await self._targets(cluster, broker_addr)
        for addr in addrs:
            try:
                await call(addr)
                out[addr] = None
            except MQClientError as e:
                if broker_addr:
                    raise
                out[addr] = str(e)
        return out

    async def update_acl_config(
        self,
        account: dict[str, Any],
        cluster: str | None = None,
        broker_addr: str | None = None,
        every_cluster: bool = False,
    ) -> dict[str, str | None]:
        """Create or update an ACL account (mqadmin updateAclConfig) on one broker or a cluster's
        masters (``every_cluster``: every cluster's, when neither is named)."""
        return await self._each(
            cluster, broker_addr, lambda addr: self.api.update_acl_config(addr, account), every_cluster
        )

    async def delete_acl_config(
        self, access_key: str, cluster: str | None = None, broker_addr: str | None = None, every_cluster: bool = False
    ) -> dict[str, str | None]:
        return await self._each(
            cluster, broker_addr, lambda addr: self.api.delete_acl_config(addr, access_key), every_cluster
        )

    async def update_global_white_addrs(
        self,
        addrs: str,
        acl_file: str | None = None,
        cluster: str | None = None,
        broker_addr: str | None = None,
        every_cluster: bool = False,
    ) -> dict[str, str | None]:
        return await self._each(
            cluster, broker_addr, lambda addr: self.api.update_global_white_addrs(addr, addrs, acl_file), every_cluster
        )

    async def acl_config_versions(
        self, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[dict[str, Any]]:
        """Each broker's ACL files and their data versions (mqadmin clusterAclConfigVersion)."""
        return [await self.api.get_broker_cluster_acl_info(addr) for addr in await self._targets(cluster, broker_addr)]

    async def cluster_list(self, cluster: str | None = None) -> list[BrokerInfo]:
        info = await self.cluster_info()
        rows = []
        for c, names in sorted(info.cluster_addr_table.items()):
            if cluster is not None and c != cluster:
                continue
            for name in names:
                bd = info.broker_addr_table.get(name)
                for bid, addr in sorted((bd.broker_addrs if bd else {}).items()):
                    rows.append(BrokerInfo(c, name, bid, addr))

        async def fill(row: BrokerInfo) -> None:
            try:
                row.runtime = await self.api.get_broker_runtime_info(row.addr)
            except MQClientError as e:
                row.error = str(e)

        await asyncio.gather(*(fill(r) for r in rows))
        return rows

    # -- consumers --------------------------------------------------------------------------

    async def _group_brokers(self, group: str, topic: str | None) -> list[str]:
        if topic:
            return [a for _, a in await self._route_masters(topic)]
        try:
            return [a for _, a in await self._route_masters(RETRY_GROUP_TOPIC_PREFIX + group)]
        except MQBrokerError as e:
            if e.code != ResponseCode.TOPIC_NOT_EXIST:
                raise
        return (await self.cluster_info()).master_addrs()

    async def consumer_progress(self, group: str, topic: str | None = None) -> ConsumerProgress:
        progress = ConsumerProgress(group)
        for addr in await self._group_brokers(group, topic):
            stats = await self.api.get_consume_stats(addr, group, topic)
            progress.consume_tps += stats.consume_tps
            for mq, w in stats.offset_table.items():
                progress.queues.append(QueueProgress(mq, w.broker_offset, w.consumer_offset, w.last_timestamp))
        progress.queues.sort(key=lambda q: q.mq)
        return progress

    async def consumer_connection(self, group: str) -> ConsumerConnection:
        """The group's online clients (MQBrokerError CONSUMER_NOT_ONLINE 206 if none)."""
        last: MQBrokerError | None = None
        for addr in await self._group_brokers(group, None):
            try:
                return await self.api.get_consumer_connection_list(addr, group)
            except MQBrokerError as e:
                last = e
        if last is not None:
            raise last
        raise MQClientError(f"no broker to ask about the consumer group {group}")

    async def producer_connection(self, group: str, topic: str) -> list[Connection]:
        """The group's producer connections to the masters of ``topic`` (as mqadmin
        producerConnection); MQBrokerError when no broker knows the group."""
        out: list[Connection] = []
        last: MQBrokerError | None = None
        for addr in await self._group_brokers(group, topic):
            try:
                out += await self.api.get_producer_connection_list(addr, group)
            except MQBrokerError as e:
                last = e
        if not out and last is not None:
            raise last
        return out

    async def update_subscription_group(
        self, config: SubscriptionGroupConfig | str, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[str]:
        cfg = SubscriptionGroupConfig(config) if isinstance(config, str) else config
        addrs = await self._targets(cluster, broker_addr)
        for addr in addrs:
            await self.api.update_and_create_subscription_group(addr, cfg)
        return addrs

    async def reset_offset_by_time(
        self, group: str, topic: str, timestamp_ms: int, force: bool = True, cplus: bool = False
    ) -> dict[MessageQueue, int]:
        """mqadmin's resetOffsetByTimestamp: INVOKE_BROKER_TO_RESET_OFFSET to each broker of
        ``topic``'s route, which sets ``group``'s offsets to the first message stored at
        ``timestamp_ms`` (-1: each queue's end; without ``force`` only where that is behind the
        group) and sends RESET_CONSUMER_CLIENT_OFFSET to the group's online members, so they
        consume from there; the offsets set. With no member online the broker answers
        CONSUMER_NOT_ONLINE (an MQBrokerError): mqadmin then falls back on
        ``reset_offset_by_time_old``."""
        route = await self.topic_route(topic)
        out: dict[MessageQueue, int] = {}
        for bd in route.broker_datas:
            addr = bd.select_broker_addr()
            if addr is not None:
                out.update(await self.api.invoke_broker_to_reset_offset(addr, topic, group, timestamp_ms, force, cplus))
        return out

    async def reset_offset_by_time_old(
        self, group: str, topic: str, timestamp_ms: int, force: bool = True
    ) -> list[RollbackStats]:
        """mqadmin's resetOffsetByTimestampOld, for a group with no member online: each queue's
        offset at ``timestamp_ms`` (-1: its max offset) written with UPDATE_CONSUMER_OFFSET when
        ``force`` or when it is not past the group's offset. The queues are those the group has
        offsets for on each broker, else every read queue (consumer offset: the queue's min)."""
        route = await self.topic_route(topic)
        read_nums = {q.broker_name: q.read_queue_nums for q in route.queue_datas}
        out: list[RollbackStats] = []
        for bd in route.broker_datas:
            addr = bd.select_broker_addr()
            if addr is None:
                continue
            stats = await self.api.get_consume_stats(addr, group)
            table = stats.offset_table.items()
            queues = [(mq, w.broker_offset, w.consumer_offset) for mq, w in table if mq.topic == topic]
            if not queues:
                status = await self.api.get_topic_stats_info(addr, topic)
                for i in range(read_nums.get(bd.broker_name, 0)):
                    mq = MessageQueue(topic, bd.broker_name, i)
                    t = status.get(mq)
                    queues.append((mq, t.max_offset if t else 0, t.min_offset if t else 0))
            for mq, broker_offset, consumer_offset in queues:
                if timestamp_ms == -1:
                    at = await self.api.get_max_offset(addr, topic, mq.queue_id)
                else:
                    at = await self.api.search_offset(addr, topic, mq.queue_id, timestamp_ms)
                rollback = consumer_offset
                if force or at <= consumer_offset:
                    rollback = at
                    await self.api.update_consumer_offset(addr, group, topic, mq.queue_id, at)
                out.append(RollbackStats(mq.broker_name, mq.queue_id, broker_offset, consumer_offset, at, rollback))
        return out

    # -- topics: perm and clusters ------------------------------------------------------------

    async def update_topic_perm(
        self, topic: str, perm: int, *, cluster: str | None = None, broker_addr: str | None = None
    ) -> list[tuple[str, int]]:
        """Set ``topic``'s perm on one master (``broker_addr``) or every master of ``cluster``,
        keeping its queue numbers and sys flag (those of the route's first queue data, as mqadmin);
        (address, old perm) per broker written. With ``broker_addr``, a perm equal to the old one
        writes nothing (an empty list); an address that is not a master of the route is an error."""
        route = await self.topic_route(topic)
        if not route.queue_datas:
            raise MQClientError(f"the topic {topic} has no queue data on the name server")
        first = route.queue_datas[0]
        old_perms = {q.broker_name: q.perm for q in route.queue_datas}
        if broker_addr:
            name = next((b.broker_name for b in route.broker_datas if b.master_addr == broker_addr), None)
            if name is None:
                raise MQClientError(
                    f"updateTopicPerm error broker not exit or broker is not master! ({broker_addr} is not a master "
                    f"of {topic}'s route)"
                )
            old = old_perms.get(name, 0)
            if old == perm:
                return []
            targets = [(broker_addr, old)]
        else:
            targets = [(addr, first.perm) for addr in await self._targets(cluster, None)]
        for addr, _ in targets:
            await self.api.update_and_create_topic(
                addr, topic, first.read_queue_nums, first.write_queue_nums, perm, topic_sys_flag=first.topic_sys_flag
            )
        self.instance.topic_routes.pop(topic, None)
        return targets

    async def topic_cluster_list(self, topic: str) -> list[str]:
        """The clusters of the brokers of ``topic``'s route."""
        route = await self.topic_route(topic)
        info = await self.cluster_info()
        names = {b.broker_name for b in route.broker_datas}
        return sorted(c for c, brokers in info.cluster_addr_table.items() if names & set(brokers))

    # -- broker config ------------------------------------------------------------------------

    async def get_broker_config(self, broker_addr: str) -> dict[str, str]:
        """The broker's configuration (GET_BROKER_CONFIG's properties), in the order it sent them."""
        resp = await self.api.invoke_ok(broker_addr, RequestCode.GET_BROKER_CONFIG)
        return properties_body(resp.body)

    async def update_broker_config(
        self, properties: dict[str, str], cluster: str | None = None, broker_addr: str | None = None
    ) -> dict[str, str | None]:
        """UPDATE_BROKER_CONFIG (a ``key=value`` properties body) to one broker or every master
        of a cluster: address → None, or the error (a single broker's error is raised)."""
        body = "".join(f"{k}={v}\n" for k, v in properties.items()).encode()
        return await self._each(
            cluster, broker_addr, lambda addr: self.api.invoke_ok(addr, RequestCode.UPDATE_BROKER_CONFIG, body=body)
        )

    # -- subscription groups ------------------------------------------------------------------

    async def delete_subscription_group(self, broker_addr: str, group: str, remove_offset: bool = False) -> None:
        ext = {"groupName": group, "removeOffset": "true" if remove_offset else "false"}
        await self.api.invoke_ok(broker_addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, ext)

    # -- name server: write perm ----------------------------------------------------------------

    async def _perm_of_broker(self, code: int, field: str, broker_name: str) -> dict[str, int | str]:
        out: dict[str, int | str] = {}
        for ns in self.instance.namesrv_addrs:
            try:
                resp = await self.api.invoke_ok(ns, code, {"brokerName": broker_name})
                out[ns] = int(resp.ext_fields.get(field, 0))
            except MQClientError as e:
                out[ns] = str(e)
        return out

    async def wipe_write_perm(self, broker_name: str) -> dict[str, int | str]:
        """WIPE_WRITE_PERM_OF_BROKER on every name server: its count of topics made read-only, or
        the error. Lasts until the broker's next registration."""
        return await self._perm_of_broker(RequestCode.WIPE_WRITE_PERM_OF_BROKER, "wipeTopicCount", broker_name)

    async def add_write_perm(self, broker_name: str) -> dict[str, int | str]:
        return await self._perm_of_broker(RequestCode.ADD_WRITE_PERM_OF_BROKER, "addTopicCount", broker_name)

    # -- consumers: running info, queue owners, clone ----------------------------------------

    async def consumer_running_info(
        self, group: str, client_id: str, jstack: bool = False, broker_addr: str | None = None
    ) -> dict[str, Any]:
        """GET_CONSUMER_RUNNING_INFO of one client of ``group`` (ConsumerRunningInfo JSON: properties,
        subscriptionSet, mqTable, statusTable[, jstack]), through a broker the client is connected to."""
        addrs = [broker_addr] if broker_addr else await self._group_brokers(group, None)
        ext = {"consumerGroup": group, "clientId": client_id, "jstackEnable": "true" if jstack else "false"}
        last: MQClientError | None = None
        for addr in addrs:
            try:
                resp = await self.api.invoke_ok(addr, RequestCode.GET_CONSUMER_RUNNING_INFO, ext)
            except MQBrokerError as e:
                last = e
                continue
            return json_body(resp.body)
        if last is not None:
            raise last
        raise MQClientError(f"no broker to ask about the consumer group {group}")

    async def consumer_connection_at(self, group: str, broker_addr: str) -> ConsumerConnection:
        return await self.api.get_consumer_connection_list(broker_addr, group)

    async def queue_owners(self, group: str) -> dict[MessageQueue, str]:
        """Which online client holds which queue (the client id's IP part, as mqadmin's
        consumerProgress -s): from each client's running info; {} when nobody is online or a
        client does not answer."""
        try:
            conn = await self.consumer_connection(group)
        except MQClientError:
            return {}
        out: dict[MessageQueue, str] = {}
        for c in conn.connections:
            try:
                info = await self.consumer_running_info(group, c.client_id)
            except MQClientError:
                continue
            for key in info.get("mqTable") or {}:
                try:
                    mq = MessageQueue.from_json(orjson.loads(key) if isinstance(key, str) else key)
                except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                    continue
                out[mq] = c.client_id.split("@")[0]
        return out

    async def clone_group_offset(self, src_group: str, dest_group: str, topic: str) -> dict[MessageQueue, int]:
        """Give ``dest_group`` the consumer offsets ``src_group`` has on ``topic``'s queues (as
        mqadmin cloneGroupOffset: read with GET_CONSUME_STATS, written with UPDATE_CONSUMER_OFFSET);
        the offsets written."""
        progress = await self.consumer_progress(src_group, topic)
        route = await self.topic_route(topic)
        out: dict[MessageQueue, int] = {}
        for q in progress.queues:
            bd = route.broker(q.mq.broker_name)
            addr = bd.master_addr if bd is not None else None
            if addr is None or q.consumer_offset < 0:
                continue
            await self.api.update_consumer_offset(addr, dest_group, q.mq.topic, q.mq.queue_id, q.consumer_offset)
            out[q.mq] = q.consumer_offset
        return out

    async def consume_message_directly(self, group: str, client_id: str, msg: MessageExt) -> dict[str, Any]:
        """CONSUME_MESSAGE_DIRECTLY: the broker holding ``msg`` hands it to ``client_id`` of
        ``group`` once (nothing committed); ConsumeMessageDirectlyResult JSON."""
        target = offset_msg_id_addr(msg.offset_msg_id)
        if target is None:
            raise MQClientError(f"{msg.offset_msg_id} is not an offset msgId")
        ext = {"consumerGroup": group, "clientId": client_id, "msgId": msg.offset_msg_id, "topic": msg.topic}
        if msg.uniq_key:
            ext["uniqueKey"] = msg.uniq_key
        resp = await self.api.invoke_ok(target[0], RequestCode.CONSUME_MESSAGE_DIRECTLY, ext, timeout_s=20.0)
        return json_body(resp.body)

    # -- stats ----------------------------------------------------------------------------------

    async def topic_consumed_by(self, broker_addr: str, topic: str) -> list[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO: the groups online on ``topic`` or with offsets of it."""
        resp = await self.api.invoke_ok(broker_addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})
        return [str(g) for g in (json_body(resp.body).get("groupList") or [])]

    async def broker_stats_data(self, broker_addr: str, stats_name: str, stats_key: str) -> dict[str, Any]:
        """VIEW_BROKER_STATS_DATA: ``{"statsMinute"|"statsHour"|"statsDay": {"sum", "tps", "avgpt"}}``."""
        resp = await self.api.invoke_ok(
            broker_addr, RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": stats_name, "statsKey": stats_key}
        )
        return json_body(resp.body)

    # -- messages ---------------------------------------------------------------------------

    async def query_msg_by_key(
        self,
        topic: str,
        key: str,
        max_num: int = 32,
        begin_ms: int = 0,
        end_ms: int = 2**63 - 1,
        unique_key: bool = False,
    ) -> list[MessageExt]:
        """Messages of ``topic`` indexed under ``key`` on every broker, newest first."""
        found: dict[str, MessageExt] = {}
        for name, addr in await self._route_masters(topic):
            for m in await self.api.query_message(addr, topic, key, max_num, begin_ms, end_ms, unique_key):
                m.broker_name = name
                found.setdefault(m.offset_msg_id, m)
        return sorted(found.values(), key=lambda m: m.store_timestamp, reverse=True)

    async def query_msg_by_unique_key(self, topic: str, uniq_key: str) -> list[MessageExt]:
        msgs = await self.query_msg_by_key(topic, uniq_key, unique_key=True)
        return [m for m in msgs if m.uniq_key == uniq_key]

    async def query_msg_by_id(self, msg_id: str, topic: str | None = None) -> MessageExt:
        """By offset msgId (any topic), else by UNIQ_KEY (``topic`` needed)."""
        msg_id = msg_id.strip().upper()
        target = offset_msg_id_addr(msg_id)
        error: Exception | None = None
        if target is not None and topic:
            # a 32-hex UNIQ_KEY also decodes as an address: ask only a broker the name server knows,
            # rather than wait for a connection to a made-up one to fail
            info = await self.cluster_info()
            known = {a for bd in info.broker_addr_table.values() for a in bd.broker_addrs.values()}
            if target[0] not in known:
                target = None
        if target is not None:
            try:
                m = await self.api.view_message(target[0], target[1])
                if m.offset_msg_id == msg_id:
                    if not m.broker_name:  # the stored record has none: the broker the id names
                        m.broker_name = await self._broker_name_of(target[0])
                    return m
            except (MQClientError, ValueError) as e:
                error = e
        if topic:
            msgs = await self.query_msg_by_unique_key(topic, msg_id)
            if msgs:
                return msgs[0]
        raise MQClientError(
            f"no message with id {msg_id}"
            + (f" ({error})" if error else "")
            + ("" if topic else "; give the topic to look it up as a UNIQ_KEY")
        )

    async def _broker_name_of(self, addr: str) -> str:
        """The name the cluster info gives the broker at ``addr`` ("" if none does)."""
        info = await self.cluster_info()
        return next((bd.broker_name for bd in info.broker_addr_table.values() if addr in bd.broker_addrs.values()), "")

    async def query_msg_by_offset(self, topic: str, broker_name: str, queue_id: int, offset: int) -> MessageExt:
        mq = MessageQueue(topic, broker_name, queue_id)
        addr = await self.instance.broker_addr(mq)
        sub = build_subscription(topic, "*")
        res = await self.api.pull_message(
            addr,
            group=TOOLS_CONSUMER_GROUP,
            topic=topic,
            queue_id=queue_id,
            offset=offset,
            max_nums=1,
            sys_flag=PULL_FLAG_SUBSCRIPTION,
            subscription="*",
        )
        res = process_pull_result(res, mq, sub)
        if res.status is not PullStatus.FOUND or not res.msgs:
            raise MQClientError(
                f"no message at offset {offset} of {mq}: {res.status.name} "
                f"(queue offsets {res.min_offset}..{res.max_offset})"
            )
        return res.msgs[0]

    # -- name server: config and KV ------------------------------------------------------------

    def _namesrvs(self, addrs: list[str] | None) -> list[str]:
        return list(addrs) if addrs else list(self.instance.namesrv_addrs)

    async def get_namesrv_config(self, addrs: list[str] | None = None) -> dict[str, dict[str, str]]:
        """GET_NAMESRV_CONFIG of each name server (default: all the admin knows): address → its config."""
        out: dict[str, dict[str, str]] = {}
        for ns in self._namesrvs(addrs):
            out[ns] = properties_body((await self.api.invoke_ok(ns, RequestCode.GET_NAMESRV_CONFIG)).body)
        return out

    async def update_namesrv_config(self, properties: dict[str, str], addrs: list[str] | None = None) -> list[str]:
        """UPDATE_NAMESRV_CONFIG (a properties body) to each name server; the addresses done."""
        body = "".join(f"{k}={v}\n" for k, v in properties.items()).encode()
        done = self._namesrvs(addrs)
        for ns in done:
            await self.api.invoke_ok(ns, RequestCode.UPDATE_NAMESRV_CONFIG, body=body)
        return done

    async def put_kv_config(self, namespace: str, key: str, value: str) -> list[str]:
        """PUT_KV_CONFIG to every name server; the addresses done."""
        done = self._namesrvs(None)
        for ns in done:
            await self.api.invoke_ok(
                ns, RequestCode.PUT_KV_CONFIG, {"namespace": namespace, "key": key, "value": value}
            )
        return done

    async def delete_kv_config(self, namespace: str, key: str) -> list[str]:
        """DELETE_KV_CONFIG on every name server; the addresses done."""
        done = self._namesrvs(None)
        for ns in done:
            await self.api.invoke_ok(ns, RequestCode.DELETE_KV_CONFIG, {"namespace": namespace, "key": key})
        return done

    async def get_kv_config(self, namespace: str, key: str) -> str | None:
        """GET_KV_CONFIG of a name server: the value, None when it has none."""

        async def call(ns: str) -> str | None:
            resp = await self.api.invoke_ok(
                ns, RequestCode.GET_KV_CONFIG, {"namespace": namespace, "key": key},
                ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
            )  # fmt: skip
            return None if resp.code == ResponseCode.QUERY_NOT_FOUND else resp.ext_fields.get("value")

        return await self.instance.namesrv_call(call)  # type: ignore[no-any-return]

    # -- brokers: metadata, stats, clean-up ------------------------------------------------------

    async def subscription_groups(self, broker_addr: str) -> dict[str, dict[str, Any]]:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG: group → SubscriptionGroupConfig JSON."""
        resp = await self.api.invoke_ok(broker_addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        return dict(json_body(resp.body).get("subscriptionGroupTable") or {})

    async def user_subscription_groups(self, broker_addr: str) -> dict[str, dict[str, Any]]:
        """The broker's subscription groups but the system ones (as DefaultMQAdminExt's getUserSubscriptionGroup)."""
        return {g: c for g, c in (await self.subscription_groups(broker_addr)).items()
                if not is_sys_consumer_group(g) and g not in SYSTEM_GROUPS}  # fmt: skip

    async def user_topic_configs(self, broker_addr: str, special_topics: bool = False) -> dict[str, dict[str, Any]]:
        """The broker's TopicConfigs but its system topics (GET_SYSTEM_TOPIC_LIST_FROM_BROKER) and,
        unless ``special_topics``, the %RETRY% and %DLQ% ones (as getUserTopicConfig)."""
        table = dict((await self.api.get_all_topic_config(broker_addr)).get("topicConfigTable") or {})
        resp = await self.api.invoke_ok(broker_addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
        system = set(json_body(resp.body).get("topicList") or [])
        special = (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)
        return {t: c for t, c in table.items() if t not in system and (special_topics or not t.startswith(special))}

    async def broker_consume_stats(
        self, broker_addr: str, is_order: bool = False, timeout_s: float = 50.0
    ) -> dict[str, Any]:
        """GET_BROKER_CONSUME_STATS: ConsumeStatsList JSON ``{"brokerAddr", "consumeStatsList": [{group:
        [ConsumeStats]}], "totalDiff"}``."""
        resp = await self.api.invoke_ok(
            broker_addr, RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "true" if is_order else "false"},
            timeout_s=timeout_s,
        )  # fmt: skip
        return json_body(resp.body)

    async def producer_info(self, broker_addr: str) -> dict[str, list[dict[str, Any]]]:
        """GET_ALL_PRODUCER_INFO: producer group → its clients (clientId, remoteIP, language, version,
        lastUpdateTimestamp)."""
        resp = await self.api.invoke_ok(broker_addr, RequestCode.GET_ALL_PRODUCER_INFO)
        return {str(g): list(v or []) for g, v in (json_body(resp.body).get("data") or {}).items()}

    async def query_consume_queue(
        self, broker_addr: str, topic: str, queue_id: int, index: int, count: int, group: str | None = None
    ) -> dict[str, Any]:
        """QUERY_CONSUME_QUEUE: QueryConsumeQueueResponseBody JSON (maxQueueIndex, minQueueIndex,
        queueData [{physicOffset, physicSize, tagsCode, ...}], subscriptionData, filterData)."""
        ext = {"topic": topic, "queueId": str(queue_id), "index": str(index), "count": str(count)}
        if group:
            ext["consumerGroup"] = group
        resp = await self.api.invoke_ok(broker_addr, RequestCode.QUERY_CONSUME_QUEUE, ext)
        if not resp.body:  # the broker's answer for an index outside the queue
            raise MQClientError(resp.remark or f"no entry {index} in {topic}'s queue {queue_id}")
        return json_body(resp.body)

    async def clean_expired_consume_queue(
        self, cluster: str | None = None, broker_addr: str | None = None
    ) -> dict[str, str | None]:
        """CLEAN_EXPIRED_CONSUMEQUEUE to one broker, a cluster's masters or (neither) every master."""
        return await self._each_code(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, cluster, broker_addr)

    async def clean_unused_topic(
        self, cluster: str | None = None, broker_addr: str | None = None
    ) -> dict[str, str | None]:
        """CLEAN_UNUSED_TOPIC to one broker, a cluster's masters or (neither) every master."""
        return await self._each_code(RequestCode.CLEAN_UNUSED_TOPIC, cluster, broker_addr)

    async def _each_code(self, code: int, cluster: str | None, broker_addr: str | None) -> dict[str, str | None]:
        """A request with no fields to one broker, a cluster's masters or (neither) every master."""
        return await self._each(cluster, broker_addr, lambda a: self.api.invoke_ok(a, code), True)


class MQAdmin(SyncClient):
    """Blocking ``AsyncMQAdmin``: every coroutine method of it, same name and arguments,
    run on a private background loop (``self.impl`` is the async admin)."""

    impl: AsyncMQAdmin

    def __init__(self, namesrv_addr: str = "127.0.0.1:9876", **kwargs: Any) -> None:
        super().__init__("pumice-admin", lambda: AsyncMQAdmin(namesrv_addr, **kwargs))

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.impl, name)
        if not asyncio.iscoroutinefunction(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._run(attr(*args, **kwargs))

        call.__name__ = name
        call.__doc__ = attr.__doc__
        return call
