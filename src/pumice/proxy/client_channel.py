"""A gRPC client as the broker sees a connection (5.3.3's ``GrpcClientChannel``), and the
in-process calls of the broker's processors through it (5.3.3's LOCAL mode:
``LocalMessageService`` hands each RemotingCommand to the broker's processor directly).

The broker's producer and consumer tables keep this channel as they keep a remoting
connection (heartbeats register it; admin tools list its client id and address). What the
broker sends on it:

| broker → channel                         | becomes                                              |
|------------------------------------------|------------------------------------------------------|
| a response (a processor that answers later, e.g. a long poll) | the result of the call waiting for that opaque |
| CHECK_TRANSACTION_STATE 39 (oneway)      | a RecoverOrphanedTransactionCommand on the client's Telemetry stream |
| NOTIFY_CONSUMER_IDS_CHANGED 40, others   | nothing (v5 clients ask for assignments themselves)  |
| ``invoke`` (GET_CONSUMER_RUNNING_INFO …) | RemotingConnectError: a v5 client answers none       |
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable
from typing import Any

from pumice.remoting.remoting_command import RPC_ONEWAY, RemotingCommand
from pumice.remoting.remoting_exceptions import RemotingConnectError
from pumice.remoting.remoting_server import RemotingServer, error_response
from pumice.remoting.response_code import ResponseCode

log = logging.getLogger(__name__)

_opaques = itertools.count(1 << 30)  # apart from a remoting client's own numbering


class GrpcClientChannel:
    """One v5 client (by client id) in the broker's tables; duck-types ``remoting_server.Channel``."""

    def __init__(self, client_id: str, remote_addr: str, language: str,
                 on_request: Callable[[GrpcClientChannel, RemotingCommand], None] | None = None) -> None:  # fmt: skip
        self.client_id = client_id
        self.remote_addr = remote_addr
        self.language = language
        self.closed = False
        self.held = 0
        self.held_bytes = 0
        self.last_active = time.monotonic()
        self.on_request = on_request
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}

    @property
    def congested(self) -> bool:
        return False

    def send(self, cmd: RemotingCommand) -> None:
        if cmd.is_response:
            fut = self._pending.pop(cmd.opaque, None)
            if fut is not None and not fut.done():
                fut.set_result(cmd)
            elif cmd.after_send is not None:
                cmd.after_send()
            return
        if self.on_request is not None and not self.closed:
            self.on_request(self, cmd)

    async def invoke(self, request: RemotingCommand, timeout_s: float) -> RemotingCommand:
        raise RemotingConnectError(f"{self.client_id} is a gRPC client: it answers no broker request {request.code}")

    def close(self) -> None:
        self.closed = True
        for fut in self._pending.values():
            if not fut.done():
                fut.cancel()
        self._pending.clear()

    def __repr__(self) -> str:
        return f"GrpcClientChannel({self.client_id}@{self.remote_addr})"


def _body_of(response: RemotingCommand) -> bytes:
    """The body as bytes (record views joined) and the views released."""
    if response.body_parts is not None:
        body = b"".join(response.body_parts)
        response.body_parts = None
    else:
        body = bytes(response.body)
    if response.after_send is not None:
        response.after_send()
        response.after_send = None
    response.body = body
    return body


async def call_processor(
    server: RemotingServer, channel: GrpcClientChannel, code: int, ext_fields: dict[str, Any], body: bytes = b"",
    timeout_s: float = 30.0, oneway: bool = False,
) -> RemotingCommand:  # fmt: skip
    """Runs the broker's processor for ``code`` with a request from ``channel``, in this loop;
    REQUEST_CODE_NOT_SUPPORTED when the broker has none. The remoting ACL hook is not run: the
    proxy authenticated the gRPC call itself (as 5.x's LOCAL mode)."""
    request = RemotingCommand(code=code, opaque=next(_opaques), ext_fields={k: str(v) for k, v in ext_fields.items()
                                                                              if v is not None},
                              body=body, language=channel.language, flag=RPC_ONEWAY if oneway else 0)  # fmt: skip
    entry = server._processors.get(code, server._default)  # LOCAL mode: the processor itself
    if entry is None:
        return request.make_response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {code} not supported")
    processor, pool = entry
    fut: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
    channel._pending[request.opaque] = fut
    try:
        async with pool.sem:
            try:
                response = await processor.process_request(channel, request)  # type: ignore[arg-type]
            except Exception as e:
                response = error_response(channel, request, e)  # type: ignore[arg-type]
        if response is None:
            if oneway:
                return request.make_response(ResponseCode.SUCCESS)
            async with asyncio.timeout(timeout_s):
                response = await fut
    finally:
        channel._pending.pop(request.opaque, None)
    _body_of(response)
    return response
