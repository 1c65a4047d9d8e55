"""MQClientInstance: what producers, consumers and admins of one client share.

* the name server list (``"host:port;host:port"``): requests go to one of them and move to
  the next when it does not answer;
* the topic route cache: routes are fetched on first use (``get_topic_route``) and refreshed
  every ``poll_name_server_interval_s`` (30 s, Java's pollNameServerInterval) for every topic
  used so far, together with the broker address table (broker name → {broker id: address});
* the client id ``ip@instance_name`` (instance name: the pid unless given);
* heartbeats to every broker seen in a route, every ``heartbeat_broker_interval_s`` (30 s) and
  as soon as a route names a broker not seen before, with
  the registered producer groups and consumer groups (``register_producer``,
  ``register_consumer(group, data_provider)``; the provider returns the group's ConsumerData
  JSON, see ``consumer_data``);
* requests brokers send first: NOTIFY_CONSUMER_IDS_CHANGED (extField consumerGroup) calls the
  listeners added with ``add_consumer_ids_changed_listener``; CHECK_TRANSACTION_STATE goes to
  the checker of the half's PGROUP (``register_transaction_checker``);
  PUSH_REPLY_MESSAGE_TO_CLIENT completes the request waiting for its CORRELATION_ID
  (``expect_reply``); the consumer calls go to ``client_remoting_processor``; other codes go
  to handlers added with ``register_request_handler`` (REQUEST_CODE_NOT_SUPPORTED when there
  is none).

All methods run on the event loop that called ``start``. A producer or consumer built without
an instance makes its own and shuts it down with itself; pass ``client_instance=`` to share
one (then its owner starts and shuts it down).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import random
import socket
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import pumice.client.client_remoting_processor as client_remoting_processor
from pumice.client.client_remoting_processor import ConsumerInner
from pumice.client.exceptions import MQBrokerError, MQClientError, RemotingError
from pumice.client.message import MessageExt, MessageQueue, PullResult, decode_messages
from pumice.client.message_id import local_ipv4
from pumice.client.mq_client_api import (
    PULL_FLAG_COMMIT_OFFSET,
    PULL_FLAG_SUBSCRIPTION,
    PULL_FLAG_SUSPEND,
    MQClientAPIImpl,
)
from pumice.client.request_reply import reply_from_push
from pumice.client.route import TopicRouteData
from pumice.client.subscription import SubscriptionData
from pumice.common.acl_signer import SessionCredentials, credentials
from pumice.common.message_const import MessageConst
from pumice.common.mix_all import MASTER_ID
from pumice.remoting.remoting_command import MissingFieldError, RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from pumice.remoting.tls import client_context

log = logging.getLogger(__name__)

ConsumerDataProvider = Callable[[], dict[str, Any]]
RequestHandler = Callable[[str, RemotingCommand], "RemotingCommand | Awaitable[RemotingCommand | None] | None"]


def consumer_data(
    group: str,
    subscriptions: list[SubscriptionData],
    consume_type: str = "CONSUME_PASSIVELY",
    message_model: str = "CLUSTERING",
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET",
) -> dict[str, Any]:
    """One ConsumerData of a heartbeat (enum fields by name, as the Java client sends them)."""
    return {
        "groupName": group,
        "consumeType": consume_type,
        "messageModel": message_model,
        "consumeFromWhere": consume_from_where,
        "unitMode": False,
        "subscriptionDataSet": [s.to_json() for s in subscriptions],
    }


def split_namesrv_addr(namesrv_addr: str | list[str]) -> list[str]:
    addrs = namesrv_addr if isinstance(namesrv_addr, list) else namesrv_addr.split(";")
    out = [a.strip() for a in addrs if a and a.strip()]
    if not out:
        raise MQClientError("no name server address: set namesrv_addr, e.g. '127.0.0.1:9876'")
    return out


def own_instance(
    client_instance: MQClientInstance | None,
    namesrv_addr: str | list[str],
    *,
    access_key: str | None,
    secret_key: str | None,
    use_tls: bool | ssl.SSLContext,
    **kwargs: Any,
) -> MQClientInstance:
    """A client's instance: the one given, or a new one with its keys and TLS. Keys or TLS given
    with an instance are refused (they belong to the instance, which is already made)."""
    if client_instance is None:
        return MQClientInstance(
            namesrv_addr, credentials=credentials(access_key, secret_key), use_tls=use_tls, **kwargs
        )
    if access_key or secret_key or use_tls:
        raise MQClientError("access_key, secret_key and use_tls are the client_instance's: give them to it")
    return client_instance


class MQClientInstance:
    def __init__(
        self,
        namesrv_addr: str | list[str],
        *,
        instance_name: str | None = None,
        client_ip: str | None = None,
        poll_name_server_interval_s: float = 30.0,
        heartbeat_broker_interval_s: float = 30.0,
        timeout_s: float = 3.0,
        credentials: SessionCredentials | None = None,
        use_tls: bool | ssl.SSLContext = False,
    ) -> None:
        self.namesrv_addrs = split_namesrv_addr(namesrv_addr)
        self._namesrv_index = random.randrange(len(self.namesrv_addrs))
        self.client_ip = client_ip or socket.inet_ntoa(local_ipv4())
        self.instance_name = instance_name or str(os.getpid())
        self.client_id = f"{self.client_ip}@{self.instance_name}"
        self.poll_name_server_interval_s = poll_name_server_interval_s
        self.heartbeat_broker_interval_s = heartbeat_broker_interval_s
        # use_tls: True checks the servers' certificates against the system's CAs; an SSLContext
        # (pumice.remoting.tls.client_context) names a CA, a client certificate, or trusts any
        ctx = client_context() if use_tls is True else (use_tls or None)
        self.api = MQClientAPIImpl(timeout_s=timeout_s, ssl_context=ctx)
        self.api.remoting.on_request = self._on_request
        if credentials is not None:  # every request signed, to brokers and name servers, as the Java client
            self.api.remoting.rpc_hook = credentials.sign_request
        self.topic_routes: dict[str, TopicRouteData] = {}
        self.broker_addr_table: dict[str, dict[int, str]] = {}
        # the broker id each group's last pull answer for a queue suggested (Java keeps a
        # pullFromWhichNodeTable per consumer; one instance may serve several groups)
        self.pull_from_which_node: dict[tuple[str, MessageQueue], int] = {}
        self.producer_groups: set[str] = set()
        self.consumer_providers: dict[str, ConsumerDataProvider] = {}
        self.consumer_inners: dict[str, ConsumerInner] = {}  # groups whose broker calls this client answers
        self._ids_changed_listeners: list[Callable[[str], Any]] = []
        self._request_handlers: dict[int, RequestHandler] = {}
        self._transaction_checkers: dict[str, RequestHandler] = {}  # producer group → its check handler
        self._replies: dict[str, asyncio.Future[MessageExt]] = {}  # CORRELATION_ID → its request's waiter
        self._tasks: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[Any]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.started = False

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        if self.started:
            return
        self._loop = asyncio.get_running_loop()
        self._tasks = [
            asyncio.create_task(self._every(self.poll_name_server_interval_s, self.update_all_topic_routes)),
            asyncio.create_task(self._every(self.heartbeat_broker_interval_s, self.send_heartbeat_to_all_brokers)),
        ]
        self.started = True

    async def shutdown(self) -> None:
        for t in self._tasks + list(self._background):
            t.cancel()
        await asyncio.gather(*self._tasks, *self._background, return_exceptions=True)
        self._tasks.clear()
        self._background.clear()
        await self.api.close()
        self.started = False

    async def _every(self, interval_s: float, job: Callable[[], Awaitable[Any]]) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await job()
            except Exception as e:  # a periodic job must survive a bad round
                log.warning("%s failed: %s", getattr(job, "__name__", job), e)

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- name servers and routes ------------------------------------------------------------

    async def namesrv_call(self, call: Callable[[str], Awaitable[Any]]) -> Any:
        """``call(addr)`` on the current name server, moving to the next one while they do
        not answer; the last RemotingError if none does. MQBrokerError is raised at once."""
        err: RemotingError | None = None
        for _ in range(len(self.namesrv_addrs)):
            addr = self.namesrv_addrs[self._namesrv_index % len(self.namesrv_addrs)]
            try:
                return await call(addr)
            except RemotingError as e:
                err = e
                self._namesrv_index += 1
        assert err is not None
        raise err

    async def update_topic_route(self, topic: str) -> TopicRouteData:
        """Fetch ``topic``'s route (MQBrokerError TOPIC_NOT_EXIST 17 if the name server has
        none) and cache it with its broker addresses."""
        route: TopicRouteData = await self.namesrv_call(
            lambda a: self.api.get_topic_route_info_from_name_server(a, topic)
        )
        self.topic_routes[topic] = route
        known = {a for addrs in self.broker_addr_table.values() for a in addrs.values()}
        for bd in route.broker_datas:
            self.broker_addr_table[bd.broker_name] = dict(bd.broker_addrs)
        if self.started and any(a not in known for bd in route.broker_datas for a in bd.broker_addrs.values()):
            # a broker first seen: heartbeat now, not in up to 30 s, so it lists this client's groups
            self._spawn(self.send_heartbeat_to_all_brokers())
        return route

    async def get_topic_route(self, topic: str, refresh: bool = False) -> TopicRouteData:
        route = None if refresh else self.topic_routes.get(topic)
        return route if route is not None else await self.update_topic_route(topic)

    async def update_all_topic_routes(self) -> None:
        for topic in list(self.topic_routes):
            try:
                await self.update_topic_route(topic)
            except MQBrokerError as e:
                if e.code == ResponseCode.TOPIC_NOT_EXIST:
                    log.info("topic %s has no route any more", topic)
                    self.topic_routes.pop(topic, None)
                else:
                    raise

    async def publish_queues(self, topic: str, refresh: bool = False) -> list[MessageQueue]:
        return (await self.get_topic_route(topic, refresh)).publish_queues(topic)

    async def subscribe_queues(self, topic: str, refresh: bool = False) -> list[MessageQueue]:
        return (await self.get_topic_route(topic, refresh)).subscribe_queues(topic)

    def find_broker_addr(
        self, broker_name: str, broker_id: int = MASTER_ID, only_this_broker: bool = True
    ) -> str | None:
        """The address of ``broker_name``'s ``broker_id`` from the cache (for a slave id that
        is gone, the next id, as Java's findBrokerAddressInSubscribe); without
        ``only_this_broker``, any address of that broker (the master first)."""
        addrs = self.broker_addr_table.get(broker_name) or {}
        if broker_id in addrs:
            return addrs[broker_id]
        if broker_id != MASTER_ID and broker_id + 1 in addrs:
            return addrs[broker_id + 1]
        if only_this_broker or not addrs:
            return None
        return addrs.get(MASTER_ID) or addrs[min(addrs)]

    async def broker_addr(self, mq: MessageQueue, broker_id: int = MASTER_ID) -> str:
        """The address to use for ``mq``: refreshes its topic's route once if unknown."""
        addr = self.find_broker_addr(mq.broker_name, broker_id, only_this_broker=False)
        if addr is None:
            await self.update_topic_route(mq.topic)
            addr = self.find_broker_addr(mq.broker_name, broker_id, only_this_broker=False)
        if addr is None:
            raise MQClientError(f"the broker {mq.broker_name} of {mq} has no address in the route")
        return addr

    async def pull_kernel(
        self,
        mq: MessageQueue,
        sub: SubscriptionData,
        *,
        group: str,
        offset: int,
        max_nums: int,
        commit_offset: int | None,
        suspend_ms: int | None,
        timeout_s: float,
    ) -> PullResult:
        """PULL_MESSAGE for ``mq`` (RocketMQ's PullAPIWrapper): sent to the broker id that
        ``mq``'s last answer suggested (suggestWhichBrokerId; the master at first, and any of
        the broker name's addresses if that id is gone), carrying ``commit_offset`` only to a
        master (a slave keeps no offsets), held by the broker ``suspend_ms`` when given. The
        answer's suggestion is kept for the group's next pull of ``mq``; a slave that fails
        sends it back to the master (which suggests the slave again if it should). Returns
        the raw answer."""
        key = (group, mq)
        want = self.pull_from_which_node.get(key, MASTER_ID)
        addr = await self.broker_addr(mq, want)
        to_slave = (self.broker_addr_table.get(mq.broker_name) or {}).get(MASTER_ID) != addr
        sys_flag = PULL_FLAG_SUBSCRIPTION
        if suspend_ms is not None:
            sys_flag |= PULL_FLAG_SUSPEND
        if commit_offset is not None and not to_slave:
            sys_flag |= PULL_FLAG_COMMIT_OFFSET
        try:
            result = await self.api.pull_message(
                addr,
                group=group,
                topic=mq.topic,
                queue_id=mq.queue_id,
                offset=offset,
                max_nums=max_nums,
                sys_flag=sys_flag,
                commit_offset=commit_offset if commit_offset is not None else 0,
                suspend_timeout_ms=suspend_ms or 0,
                subscription=sub.sub_string,
                sub_version=sub.sub_version,
                expression_type=sub.expression_type,
                timeout_s=timeout_s,
            )
        except MQClientError:
            if to_slave:
                log.warning("pulls of %s for %s go back to the master: slave %s failed", mq, group, addr)
                self.pull_from_which_node[key] = MASTER_ID
            raise
        suggested = result.suggest_which_broker_id
        if want != suggested:
            log.info("pulls of %s for %s go to broker id %d, as the broker suggested", mq, group, suggested)
        self.pull_from_which_node[key] = suggested
        return result

    def all_broker_addrs(self, masters_only: bool = False) -> list[str]:
        out = []
        for addrs in self.broker_addr_table.values():
            for bid, a in sorted(addrs.items()):
                if not masters_only or bid == MASTER_ID:
                    out.append(a)
        return out

    # -- groups and heartbeats --------------------------------------------------------------

    def register_producer(self, group: str) -> None:
        self.producer_groups.add(group)

    def register_consumer(
        self, group: str, data_provider: ConsumerDataProvider, inner: ConsumerInner | None = None
    ) -> None:
        """Heartbeats will carry ``data_provider()`` (see ``consumer_data``) for ``group``;
        ``inner`` answers the broker's calls about the group (``client_remoting_processor``)."""
        if group in self.consumer_providers:
            raise MQClientError(f"the consumer group {group} is already registered in this client")
        self.consumer_providers[group] = data_provider
        if inner is not None:
            self.consumer_inners[group] = inner

    async def unregister_producer(self, group: str) -> None:
        self.producer_groups.discard(group)
        await self._unregister_client(producer_group=group)

    async def unregister_consumer(self, group: str) -> None:
        self.consumer_providers.pop(group, None)
        self.consumer_inners.pop(group, None)
        await self._unregister_client(consumer_group=group)

    async def _unregister_client(self, producer_group: str | None = None, consumer_group: str | None = None) -> None:
        for addr in self.all_broker_addrs():
            try:
                await self.api.unregister_client(addr, self.client_id, producer_group, consumer_group)
            except MQClientError as e:
                log.info("unregister %s from %s: %s", self.client_id, addr, e)

    def heartbeat_data(self) -> dict[str, Any]:
        return {
            "clientID": self.client_id,
            "producerDataSet": [{"groupName": g} for g in sorted(self.producer_groups)],
            "consumerDataSet": [p() for _, p in sorted(self.consumer_providers.items())],
        }

    async def send_heartbeat_to_all_brokers(self) -> int:
        """One heartbeat to each broker (masters only when no consumer is registered);
        returns how many answered."""
        if not self.producer_groups and not self.consumer_providers:
            return 0
        data = self.heartbeat_data()
        ok = 0
        for addr in self.all_broker_addrs(masters_only=not self.consumer_providers):
            try:
                await self.api.send_heartbeat(addr, data)
                ok += 1
            except MQClientError as e:
                log.info("heartbeat to %s failed: %s", addr, e)
        return ok

    async def get_consumer_id_list(self, group: str, topic: str) -> list[str]:
        """The group's client ids, from one broker of ``topic`` (any broker knows them all)."""
        route = await self.get_topic_route(topic)
        brokers = [b.select_broker_addr() for b in route.broker_datas]
        addrs = [a for a in brokers if a]
        if not addrs:
            raise MQClientError(f"no broker serves {topic}")
        return await self.api.get_consumer_id_list_by_group(random.choice(addrs), group)

    # -- requests brokers send --------------------------------------------------------------

    def add_consumer_ids_changed_listener(self, listener: Callable[[str], Any]) -> None:
        """``listener(group)`` (plain or async) runs when a broker says the group changed."""
        self._ids_changed_listeners.append(listener)

    def expect_reply(self, correlation_id: str) -> asyncio.Future[MessageExt]:
        """The future a request's reply (PUSH_REPLY_MESSAGE_TO_CLIENT) will complete."""
        fut: asyncio.Future[MessageExt] = asyncio.get_running_loop().create_future()
        self._replies[correlation_id] = fut
        return fut

    def forget_reply(self, correlation_id: str) -> None:
        self._replies.pop(correlation_id, None)

    def _receive_reply(self, addr: str, cmd: RemotingCommand) -> RemotingCommand:
        try:
            msg = reply_from_push(cmd)
        except (ValueError, MissingFieldError) as e:
            log.warning("a reply message from %s that does not decode: %s", addr, e)
            return cmd.make_response(ResponseCode.SYSTEM_ERROR, str(e))
        correlation_id = msg.properties.get(MessageConst.PROPERTY_CORRELATION_ID, "")
        fut = self._replies.pop(correlation_id, None)
        if fut is not None and not fut.done():
            fut.set_result(msg)
        else:
            log.warning("receive reply message, but not matched any request, CorrelationId: %s, reply from host: %s",
                        correlation_id, addr)  # fmt: skip
        return cmd.make_response(ResponseCode.SUCCESS)

    def register_transaction_checker(self, group: str, handler: RequestHandler) -> None:
        """``handler(broker_addr, request)`` answers the broker's CHECK_TRANSACTION_STATE about a
        half message of ``group`` (the group is the PGROUP property of the request's body)."""
        self._transaction_checkers[group] = handler

    def unregister_transaction_checker(self, group: str) -> None:
        self._transaction_checkers.pop(group, None)

    def _transaction_check(self, addr: str, cmd: RemotingCommand) -> None:
        try:
            msgs = decode_messages(cmd.body or b"", decompress=False)
        except ValueError as e:
            log.warning("a transaction check from %s with a body that does not decode: %s", addr, e)
            return
        group = msgs[0].properties.get(MessageConst.PROPERTY_PRODUCER_GROUP, "") if msgs else ""
        handler = self._transaction_checkers.get(group)
        if handler is None:
            log.info("a transaction check from %s for producer group %r, which this client does not run", addr, group)
            return
        self._spawn(self._handle(addr, cmd, handler))

    def register_request_handler(self, code: int, handler: RequestHandler) -> None:
        """``handler(broker_addr, request)`` answers a request a broker sends (its response is
        written back unless the request is oneway)."""
        self._request_handlers[int(code)] = handler

    def _on_request(self, addr: str, cmd: RemotingCommand) -> None:
        if cmd.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            group = cmd.ext_str("consumerGroup") or ""
            log.info("consumer ids of %s changed (told by %s)", group, addr)
            for listener in self._ids_changed_listeners:
                try:
                    res = listener(group)
                    if inspect.isawaitable(res):
                        self._spawn(res)
                except Exception as e:
                    log.warning("consumer ids listener failed: %s", e)
            return
        if cmd.code == RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT and cmd.code not in self._request_handlers:
            self._spawn(self._handle(addr, cmd, self._receive_reply))
            return
        if cmd.code == RequestCode.CHECK_TRANSACTION_STATE and cmd.code not in self._request_handlers:
            self._transaction_check(addr, cmd)
            return
        if cmd.code in client_remoting_processor.CODES and cmd.code not in self._request_handlers:
            self._spawn(
                self._handle(addr, cmd, lambda _addr, c: client_remoting_processor.process(self.consumer_inners, c))
            )
            return
        handler = self._request_handlers.get(cmd.code)
        if handler is None:
            if not cmd.is_oneway:
                self._reply(
                    addr,
                    cmd.make_response(
                        ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported"
                    ),
                )
            return
        self._spawn(self._handle(addr, cmd, handler))

    async def _answer_consumer_call(self, addr: str, cmd: RemotingCommand) -> RemotingCommand | None:
        return await client_remoting_processor.process(self.consumer_inners, cmd)

    async def _handle(self, addr: str, cmd: RemotingCommand, handler: RequestHandler) -> None:
        try:
            res = handler(addr, cmd)
            resp = await res if inspect.isawaitable(res) else res
        except Exception as e:
            log.warning("handler of request %d failed: %s", cmd.code, e)
            resp = cmd.make_response(ResponseCode.SYSTEM_ERROR, str(e))
        if resp is not None and not cmd.is_oneway:
            resp.opaque = cmd.opaque
            self._reply(addr, resp)

    def _reply(self, addr: str, resp: RemotingCommand) -> None:
        resp.language = "PYTHON"
        self.api.remoting.send_response(addr, resp)
