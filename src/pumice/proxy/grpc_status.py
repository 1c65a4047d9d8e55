"""The answers' ``Status``: a ``Code`` and a message (5.3.3's ``ResponseBuilder``).

Every failure is answered in the RPC's own response (gRPC status OK, the error in its
``status`` field), as RocketMQ 5's proxy does; only a broken Telemetry stream ends with a gRPC
error. A broker answer that is not SUCCESS becomes:

| broker response code        | Code                         |
|-----------------------------|------------------------------|
| SUCCESS                     | OK                           |
| SYSTEM_BUSY                 | TOO_MANY_REQUESTS            |
| REQUEST_CODE_NOT_SUPPORTED  | NOT_IMPLEMENTED              |
| SUBSCRIPTION_GROUP_NOT_EXIST| CONSUMER_GROUP_NOT_FOUND     |
| TOPIC_NOT_EXIST             | TOPIC_NOT_FOUND              |
| anything else               | INTERNAL_SERVER_ERROR        |

with the broker's remark as the message.
"""

from __future__ import annotations

from typing import Any

from pumice.proxy.proto import domain_pb2 as pb
from pumice.remoting.response_code import ResponseCode

Code = pb.Code

_FROM_REMOTING: dict[int, int] = {
    ResponseCode.SUCCESS: pb.OK,
    ResponseCode.SYSTEM_BUSY: pb.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: pb.NOT_IMPLEMENTED,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: pb.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.TOPIC_NOT_EXIST: pb.TOPIC_NOT_FOUND,
}


class GrpcProxyError(Exception):
    """A request refused with ``code``; answered in the RPC's status, never raised to gRPC."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def status(code: Any, message: str | None = None) -> Any:
    return pb.Status(code=code, message=message if message is not None else pb.Code.Name(code))


def ok() -> Any:
    return status(pb.OK)


def code_of(remoting_code: int) -> int:
    return _FROM_REMOTING.get(remoting_code, pb.INTERNAL_SERVER_ERROR)


def from_remoting(remoting_code: int, remark: str | None) -> Any:
    return status(code_of(remoting_code), remark if remark else str(remoting_code))


def from_error(e: BaseException) -> Any:
    if isinstance(e, GrpcProxyError):
        return status(e.code, e.message)
    return status(pb.INTERNAL_SERVER_ERROR, f"{type(e).__name__}: {e}")
