"""The dashboard's web application (Starlette, Jinja2 templates): one page per route below.

Every page asks the cluster through ``AsyncMQAdmin`` (RocketMQ 4.x remoting only, so it works
against RocketMQ's own brokers too). Bad input is a 400 page saying why (``views.BadInput``); an
error of the cluster (a broker or name server down, an unknown topic) a 502 page with the
client's message; anything else a 500 page naming the error: never a stack trace. Destructive
actions (delete a topic, a group or an ACL account, reset offsets) are POST forms that act only
with ``confirm=yes``; without it the page asks to confirm.

========================================  ==========================================================
route                                     page
========================================  ==========================================================
GET  /                                    cluster: brokers, roles, versions, TPS, disk; DLedger;
                                          replication; store health per broker
GET  /broker/{addr}                       one broker: store health, runtime info, config
GET  /topics?filter=&system=              topic list; POST /topics creates or updates
GET  /topic/{topic}                       route, queues' min/max offsets, consumer groups, forms
POST /topic/{topic}/send|delete           send a test message / delete (confirm)
GET  /groups                              consumer groups with lag; /group/{group}: lag per queue,
                                          connections, subscriptions; POST .../reset|delete (confirm)
GET  /group/{group}/running/{clientId}    a client's running info
GET  /producers?group=&topic=             producer connections
GET  /messages?topic=&begin=&end=         messages by topic and time range; &key= by key; &msgId=
GET  /message?msgId=&topic=               one message: body (text, JSON, hex), properties;
                                          POST /message/resend, /message/consume
GET  /trace?msgId=&traceTopic=            a message's trace records
GET  /acl                                 ACL file versions; POST /acl/account, /acl/delete
                                          (confirm), /acl/white
GET  /dledger                             DLedger groups: each node's role, term, leader
GET  /charts, /charts/{kind}.svg          TPS in and out, lag: the last hour, redrawn every 5 s
========================================  ==========================================================
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from pumice.client.admin import AsyncMQAdmin, json_body, offset_msg_id_addr
from pumice.client.admin_types import SubscriptionGroupConfig
from pumice.client.exceptions import MQBrokerError, MQClientError
from pumice.client.message import Message, MessageExt, MessageQueue, PullStatus
from pumice.client.mq_client_api import PULL_FLAG_SUBSCRIPTION
from pumice.client.producer import AsyncProducer
from pumice.client.pull_consumer import process_pull_result
from pumice.client.subscription import build_subscription
from pumice.common.mix_all import RMQ_SYS_TRACE_TOPIC, TOOLS_CONSUMER_GROUP
from pumice.dashboard import views
from pumice.dashboard.same_origin import SameOriginGuard, is_loopback
from pumice.dashboard.sampler import Sampler
from pumice.dashboard.views import BadInput
from pumice.remoting.response_code import ResponseCode
from pumice.tools.message_commands import trace_views

log = logging.getLogger(__name__)

SELF_TEST_PRODUCER_GROUP = "SELF_TEST_P_GROUP"  # rocketmq-dashboard sends its test messages in this group
GET_BROKER_CLUSTER_ACL_CONFIG = 54  # 4.9's accounts and global white list (Pumice's broker has no such code)
MAX_MESSAGES = 64  # messages one search shows
GROUPS_WITH_LAG = 50  # groups whose lag the group list asks for

_env = Environment(loader=PackageLoader("pumice.dashboard", "templates"), autoescape=select_autoescape())
_env.filters["ms"] = views.format_ms
_env.filters["q"] = lambda s: quote(str(s), safe="")
_env.filters["version"] = views.client_version

Handler = Callable[[Request], Awaitable[Response]]


class Dashboard:
    """The application's state: the admin client, a producer for test messages, the sampler."""

    def __init__(
        self, namesrv_addr: str, sample_interval_s: float = 10.0, access_key: str | None = None,
        secret_key: str | None = None,
    ) -> None:  # fmt: skip
        self.namesrv_addr = namesrv_addr
        self.access_key, self.secret_key = access_key, secret_key  # an ACL account signs every request
        self.admin = AsyncMQAdmin(namesrv_addr, timeout_s=5.0, access_key=access_key, secret_key=secret_key)
        self.producer: AsyncProducer | None = None
        self.sampler = Sampler(self.admin, sample_interval_s)

    async def start(self) -> None:
        await self.admin.start()
        self.sampler.start()

    async def stop(self) -> None:
        await self.sampler.stop()
        if self.producer is not None:
            await self.producer.shutdown()
        await self.admin.shutdown()

    async def get_producer(self) -> AsyncProducer:
        if self.producer is None:
            p = AsyncProducer(SELF_TEST_PRODUCER_GROUP, self.namesrv_addr, instance_name="dashboard",
                              access_key=self.access_key, secret_key=self.secret_key)  # fmt: skip
            await p.start()
            self.producer = p
        return self.producer


def render(request: Request, template: str, code: int = 200, **ctx: Any) -> HTMLResponse:
    html = _env.get_template(template).render(
        request=request, namesrv=request.app.state.dash.namesrv_addr, path=request.url.path, **ctx
    )
    return HTMLResponse(html, status_code=code)


def page(template: str | None = None) -> Callable[[Handler], Handler]:
    """Turn the errors of a handler into pages saying what went wrong."""

    def wrap(handler: Handler) -> Handler:
        async def run(request: Request) -> Response:
            try:
                return await handler(request)
            except BadInput as e:
                return render(request, "error.html", 400, title="Bad input", message=str(e))
            except MQBrokerError as e:
                status = (
                    404 if e.code in (ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST) else 502
                )
                return render(request, "error.html", status, title="The cluster refused", message=_broker_error(e))
            except MQClientError as e:
                return render(request, "error.html", 502, title="The cluster did not answer", message=str(e))
            except Exception as e:  # the page says what, the log has the trace
                log.exception("dashboard page %s failed", request.url.path)
                return render(request, "error.html", 500, title="Internal error", message=f"{type(e).__name__}: {e}")

        return run

    return wrap


def _broker_error(e: MQBrokerError) -> str:
    if e.code == ResponseCode.TOPIC_NOT_EXIST:
        return f"no such topic: {e}"
    return str(e)


def dash(request: Request) -> Dashboard:
    return request.app.state.dash  # type: ignore[no-any-return]


async def form(request: Request) -> dict[str, str]:
    data = await request.form()
    return {k: str(v) for k, v in data.items()}


# -- cluster ------------------------------------------------------------------------------------


@page()
async def cluster_page(request: Request) -> Response:
    brokers = await dash(request).admin.cluster_list()
    rows = views.broker_rows(brokers)
    health = [views.store_health(b.addr, b.runtime) for b in brokers if not b.error]
    slaves = [s for b in brokers for s in views.slaves_behind(b.addr, b.runtime)]
    return render(
        request, "cluster.html", rows=rows, health=health, slaves=slaves, dledger=views.dledger_nodes(brokers)
    )


@page()
async def broker_page(request: Request) -> Response:
    addr = request.path_params["addr"]
    admin = dash(request).admin
    known = {b.addr for b in await admin.cluster_list()}
    if addr not in known:
        raise BadInput(f"no broker at {addr} is registered with the name server")
    rt = await admin.broker_status(addr)
    config = await admin.get_broker_config(addr)
    return render(
        request, "broker.html", addr=addr, rt=rt, config=config, health=views.store_health(addr, rt),
        slaves=views.slaves_behind(addr, rt),
    )  # fmt: skip


@page()
async def dledger_page(request: Request) -> Response:
    nodes = views.dledger_nodes(await dash(request).admin.cluster_list())
    return render(request, "dledger.html", nodes=nodes)


# -- topics -------------------------------------------------------------------------------------


def _is_system_topic(t: str) -> bool:
    return t.startswith(("%RETRY%", "%DLQ%", "rmq_sys_", "RMQ_SYS_", "SCHEDULE_TOPIC", "TBW102", "BenchmarkTest",
                         "OFFSET_MOVED_EVENT", "SELF_TEST_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC")) or t in (
        "DefaultCluster", ) or "_REPLY_TOPIC" in t  # fmt: skip


@page()
async def topics_page(request: Request) -> Response:
    admin = dash(request).admin
    needle = request.query_params.get("filter", "").strip()
    system = request.query_params.get("system") == "1"
    names = sorted(await admin.topic_list())
    clusters = set((await admin.cluster_info()).cluster_addr_table)
    names = [t for t in names if t not in clusters]  # a cluster's name is in the list as a topic
    shown = [t for t in names if needle.lower() in t.lower() and (system or not _is_system_topic(t))]
    return render(
        request, "topics.html", topics=shown, total=len(names), filter=needle, system=system, clusters=sorted(clusters)
    )


@page()
async def topic_save(request: Request) -> Response:
    f = await form(request)
    topic = views.check_name(f.get("topic"), "topic")
    read = views.check_int(f.get("readQueueNums", "8"), "read queue number", 1, 1024)
    write = views.check_int(f.get("writeQueueNums", "8"), "write queue number", 1, 1024)
    perm = views.check_int(f.get("perm", "6"), "perm", 0, 7)
    cluster = (f.get("cluster") or "").strip() or None
    broker = (f.get("broker") or "").strip() or None
    if not cluster and not broker:
        raise BadInput("name a cluster or a broker address to create the topic on")
    admin = dash(request).admin
    await admin.create_topic(topic, cluster=cluster, broker_addr=broker, read_queue_nums=read,
                             write_queue_nums=write, perm=perm)  # fmt: skip
    admin.instance.topic_routes.pop(topic, None)
    return RedirectResponse(f"/topic/{quote(topic, safe='')}?saved=1", status_code=303)


@page()
async def topic_page(request: Request) -> Response:
    topic = views.check_name(request.path_params["topic"], "topic")
    admin = dash(request).admin
    admin.instance.topic_routes.pop(topic, None)  # always the name server's current route
    route = await admin.topic_route(topic)
    status = await admin.topic_status(topic)
    groups: set[str] = set()
    for bd in route.broker_datas:
        if bd.master_addr:
            with contextlib.suppress(MQClientError):
                groups.update(await admin.topic_consumed_by(bd.master_addr, topic))
    clusters = sorted((await admin.cluster_info()).cluster_addr_table)

    async def lag(g: str) -> tuple[str, int | str]:  # rocketmq-dashboard's queryTopicConsumerInfo
        try:
            return g, (await admin.consumer_progress(g, topic)).total_lag
        except MQClientError as e:
            return g, str(e)

    lags = dict(await asyncio.gather(*(lag(g) for g in sorted(groups)[:GROUPS_WITH_LAG])))
    return render(
        request, "topic.html", topic=topic, route=route, status=status, groups=lags, clusters=clusters,
        saved=request.query_params.get("saved"), sent=None,
    )  # fmt: skip


@page()
async def topic_send(request: Request) -> Response:
    topic = views.check_name(request.path_params["topic"], "topic")
    f = await form(request)
    body = f.get("body", "")
    if not body:
        raise BadInput("the message body is empty")
    producer = await dash(request).get_producer()
    msg = Message(topic, body.encode(), tags=f.get("tag") or None, keys=f.get("key") or None)
    result = await producer.send(msg)
    return render(request, "sent.html", topic=topic, result=result)


@page()
async def topic_delete(request: Request) -> Response:
    topic = views.check_name(request.path_params["topic"], "topic")
    f = await form(request)
    if f.get("confirm") != "yes":
        return render(request, "confirm.html", what=f"delete the topic {topic} from every broker and name server",
                      action=request.url.path, fields={})  # fmt: skip
    addrs = await dash(request).admin.delete_topic(topic)
    return render(request, "done.html", message=f"topic {topic} deleted from {', '.join(addrs) or 'no broker'}")


# -- consumer groups ----------------------------------------------------------------------------


async def _all_groups(admin: AsyncMQAdmin) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for addr in (await admin.cluster_info()).master_addrs():
        with contextlib.suppress(MQClientError):
            for g, cfg in (await admin.user_subscription_groups(addr)).items():
                out.setdefault(g, cfg)
    return out


@page()
async def groups_page(request: Request) -> Response:
    admin = dash(request).admin
    groups = await _all_groups(admin)

    async def lag(g: str) -> tuple[str, Any]:
        try:
            p = await admin.consumer_progress(g)
            return g, (p.total_lag, round(p.consume_tps, 1))
        except MQClientError as e:
            return g, str(e)

    names = sorted(groups)
    lags = dict(await asyncio.gather(*(lag(g) for g in names[:GROUPS_WITH_LAG])))
    return render(request, "groups.html", groups=names, lags=lags, configs=groups)


@page()
async def group_page(request: Request) -> Response:
    group = views.check_name(request.path_params["group"], "consumer group")
    admin = dash(request).admin
    if group not in await _all_groups(admin):
        raise BadInput(f"no consumer group {group} on any master broker")
    progress = await admin.consumer_progress(group)
    try:
        conn = await admin.consumer_connection(group)
        conn_error = None
    except MQClientError as e:
        conn, conn_error = None, str(e)
    owners = await admin.queue_owners(group) if conn is not None else {}
    topics = sorted({q.mq.topic for q in progress.queues})
    return render(
        request, "group.html", group=group, progress=progress, conn=conn, conn_error=conn_error, owners=owners,
        topics=topics, now=time.strftime("%Y-%m-%dT%H:%M", time.localtime()), end_ms=int(time.time() * 1000) + 60_000,
    )  # fmt: skip


@page()
async def group_running(request: Request) -> Response:
    group = views.check_name(request.path_params["group"], "consumer group")
    client_id = request.path_params["client"]
    info = await dash(request).admin.consumer_running_info(group, client_id)
    return render(request, "running.html", group=group, client_id=client_id, info=info)


@page()
async def group_reset(request: Request) -> Response:
    group = views.check_name(request.path_params["group"], "consumer group")
    f = await form(request)
    topic = views.check_name(f.get("topic"), "topic")
    skip = f.get("time", "").strip() == "-1"  # skip the accumulated messages: each queue's end
    when = -1 if skip else views.parse_time(f.get("time"), "reset time")
    if f.get("confirm") != "yes":
        to = "each queue's end (skip the accumulated messages)" if skip else views.format_ms(when)
        return render(request, "confirm.html", action=request.url.path, fields={"topic": topic, "time": f["time"]},
                      what=f"reset the offsets of {group} on {topic} to {to}")  # fmt: skip
    admin = dash(request).admin
    try:  # members online: the broker resets and tells them; else the offsets are written (as mqadmin)
        online = bool((await admin.consumer_connection(group)).connections)
    except MQBrokerError as e:
        if e.code != ResponseCode.CONSUMER_NOT_ONLINE:
            raise
        online = False
    if online:
        table = await admin.reset_offset_by_time(group, topic, when, force=True)
        done = {f"{mq.broker_name}:{mq.queue_id}": v for mq, v in table.items()}
    else:
        stats = await admin.reset_offset_by_time_old(group, topic, when, force=True)
        done = {f"{s.broker_name}:{s.queue_id}": s.rollback_offset for s in stats}
    return render(request, "done.html", message=f"offsets of {group} on {topic} reset: {done}",
                  back=f"/group/{quote(group, safe='')}")  # fmt: skip


@page()
async def group_delete(request: Request) -> Response:
    group = views.check_name(request.path_params["group"], "consumer group")
    f = await form(request)
    if f.get("confirm") != "yes":
        return render(request, "confirm.html", action=request.url.path, fields={},
                      what=f"delete the consumer group {group} (and its offsets) from every master")  # fmt: skip
    admin = dash(request).admin
    addrs = (await admin.cluster_info()).master_addrs()
    for addr in addrs:
        await admin.delete_subscription_group(addr, group, remove_offset=True)
    return render(request, "done.html", message=f"consumer group {group} deleted from {', '.join(addrs)}")


@page()
async def group_save(request: Request) -> Response:
    f = await form(request)
    group = views.check_name(f.get("group"), "consumer group")
    cluster = (f.get("cluster") or "").strip() or None
    admin = dash(request).admin
    if not cluster:
        clusters = sorted((await admin.cluster_info()).cluster_addr_table)
        if not clusters:
            raise BadInput("the name server knows no cluster")
        cluster = clusters[0]
    await admin.update_subscription_group(SubscriptionGroupConfig(group), cluster=cluster)
    return RedirectResponse(f"/group/{quote(group, safe='')}", status_code=303)


# -- producers ----------------------------------------------------------------------------------


@page()
async def producers_page(request: Request) -> Response:
    group = request.query_params.get("group", "").strip()
    topic = request.query_params.get("topic", "").strip()
    conns = None
    if group or topic:
        conns = await dash(request).admin.producer_connection(
            views.check_name(group, "producer group"), views.check_name(topic, "topic")
        )
    return render(request, "producers.html", group=group, topic=topic, conns=conns)


# -- messages -----------------------------------------------------------------------------------


async def _by_time(admin: AsyncMQAdmin, topic: str, begin: int, end: int) -> list[MessageExt]:
    """Messages stored in [begin, end] on every queue of ``topic``, at most MAX_MESSAGES, newest first."""
    route = await admin.topic_route(topic)
    found: list[MessageExt] = []
    for q in await admin.topic_status(topic):
        bd = route.broker(q.mq.broker_name)
        addr = bd.master_addr if bd is not None else None
        if addr is None:
            continue
        start = await admin.api.search_offset(addr, topic, q.mq.queue_id, begin)
        stop = await admin.api.search_offset(addr, topic, q.mq.queue_id, end)
        offset = start
        while offset <= min(stop, q.max_offset - 1) and len(found) < MAX_MESSAGES * 4:
            res = await admin.api.pull_message(
                addr, group=TOOLS_CONSUMER_GROUP, topic=topic, queue_id=q.mq.queue_id, offset=offset, max_nums=32,
                sys_flag=PULL_FLAG_SUBSCRIPTION, subscription="*",
            )  # fmt: skip
            res = process_pull_result(res, MessageQueue(topic, q.mq.broker_name, q.mq.queue_id),
                                      build_subscription(topic, "*"))  # fmt: skip
            if res.status is not PullStatus.FOUND or not res.msgs:
                break
            for m in res.msgs:
                if begin <= m.store_timestamp <= end:
                    m.broker_name = q.mq.broker_name
                    found.append(m)
            offset = res.next_begin_offset
    found.sort(key=lambda m: m.store_timestamp, reverse=True)
    return found[:MAX_MESSAGES]


@page()
async def messages_page(request: Request) -> Response:
    qp = request.query_params
    admin = dash(request).admin
    mode = qp.get("mode", "")
    msgs: list[MessageExt] | None = None
    topic = qp.get("topic", "").strip()
    if mode == "time":
        topic = views.check_name(topic, "topic")
        begin, end = views.parse_time(qp.get("begin"), "begin time"), views.parse_time(qp.get("end"), "end time")
        if end < begin:
            raise BadInput("the end time is before the begin time")
        msgs = await _by_time(admin, topic, begin, end)
    elif mode == "key":
        topic = views.check_name(topic, "topic")
        key = qp.get("key", "").strip()
        if not key:
            raise BadInput("the message key is missing")
        msgs = await admin.query_msg_by_key(topic, key, max_num=MAX_MESSAGES)
    elif mode == "id":
        msg_id = views.check_msg_id(qp.get("msgId"))
        return RedirectResponse(f"/message?msgId={msg_id}&topic={quote(topic, safe='')}", status_code=303)
    now = time.time()
    return render(
        request, "messages.html", msgs=msgs, mode=mode, topic=topic, key=qp.get("key", ""),
        begin=qp.get("begin") or time.strftime("%Y-%m-%dT%H:%M", time.localtime(now - 3600)),
        end=qp.get("end") or time.strftime("%Y-%m-%dT%H:%M", time.localtime(now + 60)),
    )  # fmt: skip


async def _message(request: Request, msg_id: str, topic: str) -> MessageExt:
    admin = dash(request).admin
    if not topic and offset_msg_id_addr(msg_id) is None:
        raise BadInput(f"{msg_id} is not an offset msgId: give its topic to look it up as a message id (UNIQ_KEY)")
    return await admin.query_msg_by_id(msg_id, topic or None)


@page()
async def message_page(request: Request) -> Response:
    msg_id = views.check_msg_id(request.query_params.get("msgId"))
    topic = request.query_params.get("topic", "").strip()
    if topic:
        topic = views.check_name(topic, "topic")
    m = await _message(request, msg_id, topic)
    admin = dash(request).admin
    groups: list[str] = []
    with contextlib.suppress(MQClientError):
        route = await admin.topic_route(m.topic)
        for bd in route.broker_datas:
            if bd.master_addr:
                groups += await admin.topic_consumed_by(bd.master_addr, m.topic)
    return render(request, "message.html", m=m, body=views.body_views(m.body), groups=sorted(set(groups)),
                  msg_id=msg_id, result=None)  # fmt: skip


@page()
async def message_resend(request: Request) -> Response:
    f = await form(request)
    msg_id = views.check_msg_id(f.get("msgId"))
    m = await _message(request, msg_id, f.get("topic", "").strip())
    props = {k: v for k, v in m.properties.items() if k not in ("UNIQ_KEY", "MIN_OFFSET", "MAX_OFFSET", "CLUSTER")}
    producer = await dash(request).get_producer()
    again = Message(m.topic, m.body, tags=m.tags, keys=m.keys)
    again.properties.update({k: v for k, v in props.items() if k not in ("TAGS", "KEYS", "WAIT")})
    result = await producer.send(again)
    return render(request, "sent.html", topic=m.topic, result=result)


@page()
async def message_consume(request: Request) -> Response:
    f = await form(request)
    msg_id = views.check_msg_id(f.get("msgId"))
    group = views.check_name(f.get("group"), "consumer group")
    client_id = (f.get("clientId") or "").strip()
    admin = dash(request).admin
    m = await _message(request, msg_id, f.get("topic", "").strip())
    if not client_id:
        conn = await admin.consumer_connection(group)
        if not conn.connections:
            raise BadInput(f"no client of {group} is online")
        client_id = conn.connections[0].client_id
    result = await admin.consume_message_directly(group, client_id, m)
    return render(request, "done.html", message=f"consumed directly by {client_id} of {group}: {result}")


@page()
async def trace_page(request: Request) -> Response:
    msg_id = request.query_params.get("msgId", "").strip()
    trace_topic = request.query_params.get("traceTopic", "").strip() or RMQ_SYS_TRACE_TOPIC
    traces = None
    if msg_id:
        msg_id = views.check_msg_id(msg_id)
        trace_topic = views.check_name(trace_topic, "trace topic")
        msgs = await dash(request).admin.query_msg_by_key(trace_topic, msg_id)
        traces = [v for m in msgs for v in trace_views(msg_id, m)]
    return render(request, "trace.html", msg_id=msg_id, trace_topic=trace_topic, traces=traces)


# -- ACL ----------------------------------------------------------------------------------------


@page()
async def acl_page(request: Request) -> Response:
    admin = dash(request).admin
    rows = []
    for addr in (await admin.cluster_info()).master_addrs():
        row: dict[str, Any] = {"addr": addr}
        try:
            row["versions"] = await admin.api.get_broker_cluster_acl_info(addr)
        except MQClientError as e:
            row["error"] = str(e)
        try:  # 4.9's GET_BROKER_CLUSTER_ACL_CONFIG (54): the accounts and the global white list
            resp = await admin.api.invoke_ok(addr, GET_BROKER_CLUSTER_ACL_CONFIG)
            row["config"] = json_body(resp.body)
        except MQClientError as e:
            row["config_error"] = str(e)
        rows.append(row)
    return render(request, "acl.html", rows=rows)


@page()
async def acl_account(request: Request) -> Response:
    f = await form(request)
    ak, sk = (f.get("accessKey") or "").strip(), (f.get("secretKey") or "").strip()
    if len(ak) < 6 or len(sk) < 6:
        raise BadInput("the access key and the secret key need at least 6 characters each")
    account: dict[str, Any] = {
        "accessKey": ak, "secretKey": sk, "admin": f.get("admin") == "on",
        "defaultTopicPerm": f.get("defaultTopicPerm") or "DENY", "defaultGroupPerm": f.get("defaultGroupPerm") or "SUB",
    }  # fmt: skip
    # what is not given is left out, as mqadmin updateAclConfig does (the broker refuses an empty perm list)
    if (f.get("whiteRemoteAddress") or "").strip():
        account["whiteRemoteAddress"] = f["whiteRemoteAddress"].strip()
    for field in ("topicPerms", "groupPerms"):
        perms = [p.strip() for p in (f.get(field) or "").split(",") if p.strip()]
        if perms:
            account[field] = ",".join(perms)  # a comma list in the request's fields
    admin = dash(request).admin
    done = await admin.update_acl_config(account, every_cluster=True)
    return render(request, "done.html", message=f"account {ak} saved: {_each_text(done)}", back="/acl")


@page()
async def acl_delete(request: Request) -> Response:
    f = await form(request)
    ak = (f.get("accessKey") or "").strip()
    if not ak:
        raise BadInput("the access key is missing")
    if f.get("confirm") != "yes":
        return render(request, "confirm.html", action=request.url.path, fields={"accessKey": ak},
                      what=f"delete the ACL account {ak} on every master")  # fmt: skip
    admin = dash(request).admin
    done = await admin.delete_acl_config(ak, every_cluster=True)
    return render(request, "done.html", message=f"account {ak} deleted: {_each_text(done)}", back="/acl")


@page()
async def acl_white(request: Request) -> Response:
    f = await form(request)
    addrs = (f.get("addrs") or "").strip()
    admin = dash(request).admin
    done = await admin.update_global_white_addrs(addrs, every_cluster=True)
    return render(request, "done.html", message=f"global white list set to {addrs!r}: {_each_text(done)}", back="/acl")


def _each_text(done: dict[str, str | None]) -> str:
    return "; ".join(f"{a}: {e or 'ok'}" for a, e in done.items()) or "no master broker"


# -- charts -------------------------------------------------------------------------------------


@page()
async def charts_page(request: Request) -> Response:
    s = dash(request).sampler
    return render(request, "charts.html", interval=s.interval_s, count=len(s.samples), error=s.last_error)


async def chart_svg(request: Request) -> Response:
    kind = request.path_params["kind"]
    if kind not in ("tps_in", "tps_out", "lag"):
        return Response(f"no chart {kind!r}: tps_in, tps_out or lag", status_code=404, media_type="text/plain")
    svg = views.svg_chart(dash(request).sampler.series(kind))
    return Response(svg, media_type="image/svg+xml", headers={"Cache-Control": "no-store"})


async def not_found(request: Request, exc: Exception) -> Response:
    return render(request, "error.html", 404, title="Not found", message=f"no page at {request.url.path}")


def create_app(
    namesrv_addr: str,
    sample_interval_s: float = 10.0,
    access_key: str | None = None,
    secret_key: str | None = None,
    host: str = "127.0.0.1",
) -> Starlette:
    dashboard = Dashboard(namesrv_addr, sample_interval_s, access_key, secret_key)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await dashboard.start()
        try:
            yield
        finally:
            await dashboard.stop()

    routes = [
        Route("/", cluster_page),
        Route("/broker/{addr}", broker_page),
        Route("/dledger", dledger_page),
        Route("/topics", topics_page),
        Route("/topics", topic_save, methods=["POST"]),
        Route("/topic/{topic}", topic_page),
        Route("/topic/{topic}/send", topic_send, methods=["POST"]),
        Route("/topic/{topic}/delete", topic_delete, methods=["POST"]),
        Route("/groups", groups_page),
        Route("/groups", group_save, methods=["POST"]),
        Route("/group/{group}", group_page),
        Route("/group/{group}/running/{client}", group_running),
        Route("/group/{group}/reset", group_reset, methods=["POST"]),
        Route("/group/{group}/delete", group_delete, methods=["POST"]),
        Route("/producers", producers_page),
        Route("/messages", messages_page),
        Route("/message", message_page),
        Route("/message/resend", message_resend, methods=["POST"]),
        Route("/message/consume", message_consume, methods=["POST"]),
        Route("/trace", trace_page),
        Route("/acl", acl_page),
        Route("/acl/account", acl_account, methods=["POST"]),
        Route("/acl/delete", acl_delete, methods=["POST"]),
        Route("/acl/white", acl_white, methods=["POST"]),
        Route("/charts", charts_page),
        Route("/charts/{kind}.svg", chart_svg),
        Mount("/static", StaticFiles(directory=os.path.join(os.path.dirname(__file__), "static")), name="static"),
    ]
    guard = Middleware(SameOriginGuard, loopback_bound=is_loopback(host))  # no login: no other site's requests
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={404: not_found}, middleware=[guard])
    app.state.dash = dashboard
    return app
