"""Heartbeat, Telemetry and NotifyClientTermination (5.3.3's ``ClientActivity``).

A client's Settings arrive on its Telemetry stream: the proxy registers it with the broker
(a HEART_BEAT through the broker's processor, from the client's ``GrpcClientChannel``, so
``producerConnection``/``consumerConnection`` list it), keeps the settings and answers the
merged Settings (``client_manager``). Producers register under each topic of their
publishing settings as the group (5.x's rule); consumers under their group, with their
subscriptions (TAG or SQL92), consume type CONSUME_PASSIVELY (push) or CONSUME_ACTIVELY
(simple), CLUSTERING, CONSUME_FROM_LAST_OFFSET. Heartbeat repeats the registration;
a client whose settings are unknown gets UNRECOGNIZED_CLIENT_TYPE. NotifyClientTermination
unregisters it (UNREGISTER_CLIENT) and forgets it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import orjson

from pumice.client.subscription import MessageSelector, build_subscription
from pumice.proxy.activity import Activity
from pumice.proxy.client_manager import GrpcClient
from pumice.proxy.grpc_status import GrpcProxyError, from_error, from_remoting, ok, status
from pumice.proxy.proto import domain_pb2 as pb
from pumice.proxy.proto import messaging_pb2 as mpb
from pumice.proxy.proxy_context import ProxyContext
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode

log = logging.getLogger(__name__)

END_OF_STREAM = None  # put in a Telemetry outbox: the stream ends (the client left, or shutdown)
_CONSUME_TYPE = {pb.PUSH_CONSUMER: "CONSUME_PASSIVELY", pb.SIMPLE_CONSUMER: "CONSUME_ACTIVELY"}


class ClientActivity:
    def __init__(self, base: Activity) -> None:
        self.base = base

    def _heartbeat_data(self, client: GrpcClient, settings: Any) -> dict[str, Any]:
        data: dict[str, Any] = {"clientID": client.client_id, "producerDataSet": [], "consumerDataSet": []}
        if settings.HasField("publishing"):
            data["producerDataSet"] = [{"groupName": t.name} for t in settings.publishing.topics]
        elif settings.HasField("subscription"):
            subs = []
            for entry in settings.subscription.subscriptions:
                expression = entry.expression
                try:
                    selector = (MessageSelector.by_sql(expression.expression) if expression.type == pb.SQL
                                else MessageSelector.by_tag(expression.expression or "*"))  # fmt: skip
                except Exception as e:
                    raise GrpcProxyError(pb.ILLEGAL_FILTER_EXPRESSION, f"{expression.expression}: {e}") from None
                subs.append(build_subscription(entry.topic.name, selector).to_json())
            data["consumerDataSet"] = [{
                "groupName": settings.subscription.group.name,
                "consumeType": _CONSUME_TYPE.get(settings.client_type, "CONSUME_ACTIVELY"),
                "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "subscriptionDataSet": subs, "unitMode": False,
            }]  # fmt: skip
        return data

    async def _register(self, client: GrpcClient, settings: Any) -> None:
        b = self.base
        if settings.HasField("publishing"):
            for topic in settings.publishing.topics:
                b.validate_topic(topic)
            client.producer_groups = {t.name for t in settings.publishing.topics}
        elif settings.HasField("subscription"):
            client.consumer_group = b.validate_group(settings.subscription.group)
        body = orjson.dumps(self._heartbeat_data(client, settings))
        response = await b.call(client.channel, RequestCode.HEART_BEAT, {}, body)
        if response.code != ResponseCode.SUCCESS:
            raise GrpcProxyError(from_remoting(response.code, response.remark).code, response.remark or "heartbeat")

    async def heartbeat(self, ctx: ProxyContext, request: Any) -> Any:
        b = self.base
        b.authorize(ctx, RequestCode.HEART_BEAT)
        known = b.clients.get(ctx.client_id)
        if known is None or known.settings is None:
            return mpb.HeartbeatResponse(
                status=status(pb.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client")
            )
        settings = known.settings
        if settings.client_type not in (pb.PRODUCER, pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER):
            return mpb.HeartbeatResponse(
                status=status(pb.UNRECOGNIZED_CLIENT_TYPE, pb.ClientType.Name(settings.client_type))
            )
        if settings.client_type != pb.PRODUCER:
            b.validate_group(request.group)
        client = b.clients.client(ctx.client_id, ctx.remote_addr, ctx.language)
        await self._register(client, settings)
        return mpb.HeartbeatResponse(status=ok())

    async def notify_client_termination(self, ctx: ProxyContext, request: Any) -> Any:
        b = self.base
        b.authorize(ctx, RequestCode.UNREGISTER_CLIENT)
        client = b.clients.get(ctx.client_id)
        if client is None or client.settings is None:
            return mpb.NotifyClientTerminationResponse(
                status=status(pb.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client")
            )
        for group in sorted(client.producer_groups):
            await b.call(client.channel, RequestCode.UNREGISTER_CLIENT,
                         {"clientID": client.client_id, "producerGroup": group})  # fmt: skip
        if client.consumer_group:
            await b.call(client.channel, RequestCode.UNREGISTER_CLIENT,
                         {"clientID": client.client_id, "consumerGroup": client.consumer_group})  # fmt: skip
        b.clients.remove(client.client_id)
        b.broker.producers.do_channel_close_event(client.channel)
        b.broker.consumers.do_channel_close_event(client.channel)
        return mpb.NotifyClientTerminationResponse(status=ok())

    async def _settings(self, ctx: ProxyContext, command: Any, client: GrpcClient) -> Any:
        settings = command.settings
        if settings.WhichOneof("pub_sub") is None:
            raise GrpcProxyError(pb.BAD_REQUEST, "there is no publishing or subscription data in settings")
        await self._register(client, settings)
        client.settings = settings
        return mpb.TelemetryCommand(status=ok(), settings=self.base.clients.merged_settings(client))

    async def telemetry(self, ctx: ProxyContext, commands: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """The bidirectional stream: Settings in, Settings out, and the server's commands
        (RecoverOrphanedTransactionCommand) whenever the broker has one for this client."""
        b = self.base
        outbox: asyncio.Queue[Any] = asyncio.Queue()
        try:
            b.authorize(ctx, RequestCode.HEART_BEAT)
        except GrpcProxyError as e:
            yield mpb.TelemetryCommand(status=from_error(e))
            return
        client = b.clients.client(ctx.client_id, ctx.remote_addr, ctx.language)
        client.telemetry = outbox

        async def read() -> None:
            try:
                async for command in commands:
                    kind = command.WhichOneof("command")
                    if kind == "settings":
                        try:
                            outbox.put_nowait(await self._settings(ctx, command, client))
                        except Exception as e:  # answered, then the stream ends (5.3.3: an error ends it)
                            if not isinstance(e, GrpcProxyError):
                                log.exception("telemetry settings of %s failed", ctx.client_id)
                            outbox.put_nowait(mpb.TelemetryCommand(status=from_error(e)))
                            break
                    elif kind in ("thread_stack_trace", "verify_message_result"):
                        log.info("telemetry %s from %s: %s", kind, ctx.client_id, command.status.message)
            except (asyncio.CancelledError, Exception) as e:  # the client went away
                log.debug("telemetry stream of %s ended: %r", ctx.client_id, e)
            finally:
                outbox.put_nowait(END_OF_STREAM)

        reader = asyncio.get_running_loop().create_task(read())
        try:
            while True:
                item = await outbox.get()
                if item is END_OF_STREAM:
                    break
                yield item
        finally:
            if client.telemetry is outbox:
                client.telemetry = None
            reader.cancel()
