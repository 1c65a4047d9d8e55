"""DLedgerRpcService: this node's ``dLegerPeers`` port and its calls to the other members
(dledger 0.3.1.2, ``DLedgerRpcNettyService.java``).

The server listens on the port its own ``dLegerPeers`` entry names, on all interfaces (as
DLedger's NettyRemotingServer). Each request's body is decoded as its code's message and handed
to the ``DLedgerProtocolHandler`` (the DLedgerServer); the answer goes back as remoting code 200
with the message as body:

==============================  ===========================================================
request                         answer
==============================  ===========================================================
known code, good body           200, the handler's message (its ``code`` is the outcome)
PULL (51003)                    none (DLedger's handlePull returns null)
an unknown code                 none, logged (DLedger answers nothing either)
a body that is not the message  SYSTEM_ERROR (1) with the reason as remark (as Netty's
                                processor answers an exception)
==============================  ===========================================================

Calls to peers use a RemotingClient with DLedger's 3000 ms time-out. A vote that gets no answer
counts as an empty VoteResponse (voteResult UNKNOWN); any other call that fails is answered
locally with code NETWORK_ERROR (302), as DLedger's futures complete.
"""

from __future__ import annotations

import logging
from typing import Protocol, TypeVar

from pumice.dledger.dledger_protocol import (
    REQUEST_TYPES,
    AppendEntryResponse,
    DLedgerRequestCode,
    GetEntriesResponse,
    HeartBeatRequest,
    HeartBeatResponse,
    LeadershipTransferRequest,
    LeadershipTransferResponse,
    MetadataResponse,
    PushEntryRequest,
    PushEntryResponse,
    RequestOrResponse,
    VoteRequest,
    VoteResponse,
)
from pumice.dledger.dledger_response_code import DLedgerResponseCode
from pumice.dledger.member_state import MemberState
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_exceptions import RemotingTimeoutError
from pumice.remoting.remoting_server import Channel, ProcessorPool, RemotingServer

log = logging.getLogger(__name__)

RPC_TIMEOUT_S = 3.0  # DLedgerRpcNettyService: invokeAsync/invokeSync(…, 3000, …)
# requests one connection may have in flight here: a follower holds each APPEND until the
# entries before it are written (DLedger's leader sends up to 1000 ahead per follower)
WORKERS = 4096

R = TypeVar("R", bound=RequestOrResponse)


class DLedgerProtocolHandler(Protocol):
    async def handle_request(self, code: int, request: RequestOrResponse) -> RequestOrResponse | None: ...


class _Processor:
    def __init__(self, service: DLedgerRpcService) -> None:
        self.service = service

    async def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        cls = REQUEST_TYPES.get(request.code)
        if cls is None:
            log.error("[%s] unknown request code %d from %s: not answered", self.service.self_id, request.code,
                      channel.remote_addr)  # fmt: skip
            return None
        if request.code == DLedgerRequestCode.PULL:
            return None
        message = cls.decode(request.body)  # DLedgerProtocolError: SYSTEM_ERROR with its words
        answer = await self.service.handler.handle_request(request.code, message)
        if answer is None:
            return None
        return request.make_response(DLedgerResponseCode.SUCCESS, body=answer.encode())


class DLedgerRpcService:
    def __init__(self, member_state: MemberState, handler: DLedgerProtocolHandler, host: str = "0.0.0.0") -> None:
        self.member_state = member_state
        self.self_id = member_state.self_id
        self.handler = handler
        _, _, port = member_state.self_address.rpartition(":")
        if not port.isdigit():
            raise ValueError(f"dLegerPeers entry of {self.self_id} has no port: {member_state.self_address!r}")
        self.server = RemotingServer(host, int(port), name=f"DLedgerRpc-{self.self_id}")
        self.server.register_default_processor(_Processor(self), ProcessorPool("DLedger", WORKERS, WORKERS * 4))
        self.client = RemotingClient(connect_timeout_s=RPC_TIMEOUT_S)

    async def start(self) -> None:
        await self.server.start()

    async def shutdown(self) -> None:
        await self.server.close()
        await self.client.close()

    @property
    def port(self) -> int:
        return self.server.port

    # -- calls to peers ---------------------------------------------------------------------

    async def _invoke(self, code: DLedgerRequestCode, request: RequestOrResponse, answer: type[R]) -> R:
        addr = self.member_state.peer_map.get(request.remote_id or "")
        if addr is None:
            return _failed(answer, request, DLedgerResponseCode.UNKNOWN_MEMBER)
        try:
            cmd = RemotingCommand(code=int(code), language="JAVA", body=request.encode())
            response = await self.client.invoke(addr, cmd, RPC_TIMEOUT_S)
            if response.code != DLedgerResponseCode.SUCCESS:
                log.warning("[%s] %s to %s answered remoting code %d: %s", self.self_id, code.name,
                            request.remote_id, response.code, response.remark)  # fmt: skip
                return _failed(answer, request, DLedgerResponseCode.NETWORK_ERROR)
            return answer.decode(response.body)
        except Exception as e:  # no answer, a refused connection, a body we cannot read
            log.debug("[%s] %s to %s failed: %s", self.self_id, code.name, request.remote_id, e)
            if isinstance(e, RemotingTimeoutError):
                # a peer cut off and back: the old connection may stay silent in TCP's back-off
                self.client.close_connection(addr)
            return _failed(answer, request, DLedgerResponseCode.NETWORK_ERROR)

    async def vote(self, request: VoteRequest) -> VoteResponse:
        resp = await self._invoke(DLedgerRequestCode.VOTE, request, VoteResponse)
        if resp.code == DLedgerResponseCode.NETWORK_ERROR:
            return VoteResponse()  # DLedger: an empty response, voteResult UNKNOWN
        return resp

    async def heart_beat(self, request: HeartBeatRequest) -> HeartBeatResponse:
        return await self._invoke(DLedgerRequestCode.HEART_BEAT, request, HeartBeatResponse)

    async def push(self, request: PushEntryRequest) -> PushEntryResponse:
        return await self._invoke(DLedgerRequestCode.PUSH, request, PushEntryResponse)

    async def leadership_transfer(self, request: LeadershipTransferRequest) -> LeadershipTransferResponse:
        return await self._invoke(DLedgerRequestCode.LEADERSHIP_TRANSFER, request, LeadershipTransferResponse)

    async def metadata(self, request: RequestOrResponse) -> MetadataResponse:
        return await self._invoke(DLedgerRequestCode.METADATA, request, MetadataResponse)

    async def append(self, request: RequestOrResponse) -> AppendEntryResponse:
        return await self._invoke(DLedgerRequestCode.APPEND, request, AppendEntryResponse)

    async def get(self, request: RequestOrResponse) -> GetEntriesResponse:
        return await self._invoke(DLedgerRequestCode.GET, request, GetEntriesResponse)


def _failed(answer: type[R], request: RequestOrResponse, code: DLedgerResponseCode) -> R:
    resp = answer().copy_base_info(request)
    resp.code = int(code)
    return resp
