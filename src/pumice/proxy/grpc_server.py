"""The gRPC endpoint: ``apache.rocketmq.v2.MessagingService`` on ``grpcServerPort``, in the
broker's process and on its event loop (5.3.3's ``GrpcServer`` and ``GrpcMessagingApplication``
with the proxy in LOCAL mode; docs/v5/grpc.md says why one loop).

Every unary RPC answers in its own response: a refused call has gRPC status OK and its
``status`` field set (GrpcProxyError → its code; anything unexpected → INTERNAL_SERVER_ERROR,
logged). The offset RPCs (PullMessage, UpdateOffset, GetOffset, QueryOffset) are not served
(gRPC UNIMPLEMENTED), as 5.3.3's proxy does not serve them. TLS as the broker's ``tlsMode`` (and
its certificate keys) says: disabled, grpcio listens on the port, plain text only; permissive or
enforcing, ``protocol_negotiator`` listens on it and splices each connection to grpcio's plain
or TLS port on 127.0.0.1. RecallMessage: recall_activity.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from pumice.proxy.activity import Activity
from pumice.proxy.client_activity import END_OF_STREAM, ClientActivity
from pumice.proxy.client_manager import GrpcClient, GrpcClientManager
from pumice.proxy.consumer_activity import ConsumerActivity
from pumice.proxy.grpc_status import GrpcProxyError, from_error
from pumice.proxy.proto import messaging_pb2 as mpb
from pumice.proxy.proto import messaging_pb2_grpc as mpb_grpc
from pumice.proxy.protocol_negotiator import HANDSHAKE_TIMEOUT_S, LOOPBACK, ProtocolNegotiator, original_peer
from pumice.proxy.proxy_config import ProxyConfig
from pumice.proxy.proxy_context import ProxyContext
from pumice.proxy.recall_activity import RecallActivity
from pumice.proxy.route_activity import RouteActivity
from pumice.proxy.send_activity import SendActivity
from pumice.proxy.transaction_activity import TransactionActivity
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.tls import TlsConfigError, TlsSettings, test_certificate_pem

log = logging.getLogger(__name__)


def _context(rpc: str, context: Any) -> ProxyContext:
    return ProxyContext.of(rpc, context.invocation_metadata(), original_peer(context.peer()))


async def _unary(rpc: str, context: Any, run: Callable[[ProxyContext], Awaitable[Any]],
                 response_type: Any) -> Any:  # fmt: skip
    ctx = _context(rpc, context)
    try:
        return await run(ctx)
    except GrpcProxyError as e:
        return response_type(status=from_error(e))
    except Exception as e:
        log.exception("gRPC %s from %s (%s) failed", rpc, ctx.remote_addr, ctx.client_id)
        return response_type(status=from_error(e))


class MessagingService(mpb_grpc.MessagingServiceServicer):  # type: ignore[misc]
    def __init__(self, broker: Any, config: ProxyConfig) -> None:
        self.clients = GrpcClientManager(config, lambda g: broker.subscription_groups.subscription_group_table.get(g))
        base = Activity(broker, config, self.clients)
        self.routes = RouteActivity(broker, config, self.clients)
        self.transactions = TransactionActivity(base)
        self.sends = SendActivity(base, self.transactions)
        self.recalls = RecallActivity(base)
        self.client_activity = ClientActivity(base)
        self.consumers = ConsumerActivity(base)
        self.clients.on_broker_request = self._broker_request

    def _broker_request(self, client: GrpcClient, request: RemotingCommand) -> None:
        if request.code == RequestCode.CHECK_TRANSACTION_STATE:
            self.transactions.on_check(client, request)

    async def QueryRoute(self, request: Any, context: Any) -> Any:
        return await _unary("QueryRoute", context, lambda c: self.routes.query_route(c, request),
                            mpb.QueryRouteResponse)  # fmt: skip

    async def Heartbeat(self, request: Any, context: Any) -> Any:
        return await _unary("Heartbeat", context, lambda c: self.client_activity.heartbeat(c, request),
                            mpb.HeartbeatResponse)  # fmt: skip

    async def SendMessage(self, request: Any, context: Any) -> Any:
        return await _unary("SendMessage", context, lambda c: self.sends.send_message(c, request),
                            mpb.SendMessageResponse)  # fmt: skip

    async def RecallMessage(self, request: Any, context: Any) -> Any:
        return await _unary("RecallMessage", context, lambda c: self.recalls.recall_message(c, request),
                            mpb.RecallMessageResponse)  # fmt: skip

    async def QueryAssignment(self, request: Any, context: Any) -> Any:
        return await _unary("QueryAssignment", context, lambda c: self.routes.query_assignment(c, request),
                            mpb.QueryAssignmentResponse)  # fmt: skip

    async def ReceiveMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:
        ctx = _context("ReceiveMessage", context)
        try:
            async for item in self.consumers.receive_message(ctx, request):
                yield item
        except Exception as e:
            log.exception("gRPC ReceiveMessage from %s (%s) failed", ctx.remote_addr, ctx.client_id)
            yield mpb.ReceiveMessageResponse(status=from_error(e))

    async def AckMessage(self, request: Any, context: Any) -> Any:
        return await _unary("AckMessage", context, lambda c: self.consumers.ack_message(c, request),
                            mpb.AckMessageResponse)  # fmt: skip

    async def ForwardMessageToDeadLetterQueue(self, request: Any, context: Any) -> Any:
        return await _unary("ForwardMessageToDeadLetterQueue", context,
                            lambda c: self.consumers.forward_to_dlq(c, request),
                            mpb.ForwardMessageToDeadLetterQueueResponse)  # fmt: skip

    async def EndTransaction(self, request: Any, context: Any) -> Any:
        return await _unary("EndTransaction", context, lambda c: self.transactions.end_transaction(c, request),
                            mpb.EndTransactionResponse)  # fmt: skip

    async def NotifyClientTermination(self, request: Any, context: Any) -> Any:
        return await _unary("NotifyClientTermination", context,
                            lambda c: self.client_activity.notify_client_termination(c, request),
                            mpb.NotifyClientTerminationResponse)  # fmt: skip

    async def ChangeInvisibleDuration(self, request: Any, context: Any) -> Any:
        return await _unary("ChangeInvisibleDuration", context,
                            lambda c: self.consumers.change_invisible_duration(c, request),
                            mpb.ChangeInvisibleDurationResponse)  # fmt: skip

    async def Telemetry(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        ctx = _context("Telemetry", context)
        async for item in self.client_activity.telemetry(ctx, request_iterator):
            yield item


class ProxyServer:
    """The endpoint's life cycle beside the broker's: start after it, stop before it."""

    def __init__(self, broker: Any, config: ProxyConfig, optional: bool = False) -> None:
        self.broker = broker
        self.config = config
        self.service = MessagingService(broker, config)
        self.port = config.grpc_server_port
        self.optional = optional  # a port in use: run without the endpoint (pumice dev's default)
        self.unavailable: str | None = None
        self._server: Any = None
        self._negotiator: ProtocolNegotiator | None = None
        self.tls_mode = "disabled"

    @property
    def host(self) -> str:
        return str(self.broker.config.listen_host or "0.0.0.0")

    async def start(self) -> None:
        size = self.config.grpc_max_inbound_message_size
        handshake_ms = int(HANDSHAKE_TIMEOUT_S * 1000)
        server = grpc.aio.server(options=[("grpc.max_receive_message_length", size), ("grpc.so_reuseport", 0),
                                          ("grpc.server_handshake_timeout_ms", handshake_ms)])  # fmt: skip
        mpb_grpc.add_MessagingServiceServicer_to_server(self.service, server)
        tls: TlsSettings = self.broker.config.tls_settings()
        where = f"{self.host}:{self.config.grpc_server_port}"
        if tls.enabled:
            bound = await self._start_negotiator(server, tls, where)
        else:
            try:
                bound = server.add_insecure_port(where)
            except RuntimeError:  # grpcio raises when the port cannot be bound
                bound = 0
        if bound == 0:
            if self.optional:
                self.unavailable = f"gRPC proxy not started: {where} is in use (--grpc-port, or --no-proxy)"
                log.warning("%s", self.unavailable)
                return
            raise OSError(
                errno.EADDRINUSE, f"cannot listen on {where} (grpcServerPort) for gRPC: the address is in use"
            )
        self.port = bound
        await server.start()
        self._server = server
        protocols = "plain text" if self._negotiator is None else f"TLS and plain text (tlsMode={self.tls_mode})"
        log.info("gRPC endpoint (apache.rocketmq.v2.MessagingService) on %s:%d, %s", self.host, bound, protocols)

    async def _start_negotiator(self, server: Any, tls: TlsSettings, where: str) -> int:
        """grpcio on two loopback ports, the negotiator on the public one; 0 when it is in use."""
        try:
            credentials = server_credentials(tls)
        except TlsConfigError as e:
            raise RuntimeError(f"TLS cannot start on the gRPC port: {e}") from e
        plain_port = server.add_insecure_port(f"{LOOPBACK}:0")
        tls_port = server.add_secure_port(f"{LOOPBACK}:0", credentials)
        negotiator = ProtocolNegotiator(tls.mode, plain_port, tls_port)
        try:
            bound = await negotiator.start(self.host, self.config.grpc_server_port)
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                raise
            return 0
        self._negotiator = negotiator
        self.tls_mode = tls.mode
        return bound

    async def shutdown(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        negotiator, self._negotiator = self._negotiator, None
        if negotiator is not None:  # no new connections; open ones end with the server's grace
            negotiator.stop_listening()
        for client in list(self.service.clients.clients.values()):
            if client.telemetry is not None:  # long-lived streams end now, not after the grace
                client.telemetry.put_nowait(END_OF_STREAM)
        await server.stop(self.config.grpc_shutdown_time_seconds)
        if negotiator is not None:
            await negotiator.close()

    def banner(self) -> str:
        if self.unavailable:
            return self.unavailable
        return f"gRPC proxy (RocketMQ 5 clients) on {self.host}:{self.port}"


def server_credentials(tls: TlsSettings) -> Any:
    """grpcio's TLS credentials from the broker's TLS keys: tlsServerCertPath/tlsServerKeyPath,
    else the test certificate (tlsTestModeEnable); tlsServerTrustCertPath with
    tlsServerNeedClientAuth for client certificates. TlsConfigError naming a file that does not load."""
    tls.check()
    if tls.has_files:
        assert tls.cert_path and tls.key_path
        try:
            with open(tls.cert_path, "rb") as f:
                cert = f.read()
            with open(tls.key_path, "rb") as f:
                key = f.read()
        except OSError as e:
            raise TlsConfigError(f"tlsServerCertPath {tls.cert_path} / tlsServerKeyPath {tls.key_path}: {e}") from e
    else:
        cert, key = test_certificate_pem()
    roots = None
    if tls.trust_cert_path:
        try:
            with open(tls.trust_cert_path, "rb") as f:
                roots = f.read()
        except OSError as e:
            raise TlsConfigError(f"tlsServerTrustCertPath {tls.trust_cert_path}: {e}") from e
    return grpc.ssl_server_credentials([(key, cert)], root_certificates=roots,
                                       require_client_auth=tls.need_client_auth == "require")  # fmt: skip
