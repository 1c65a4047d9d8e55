"""Typed errors of ``pumice.client``.

=====================  ============================================================
class                  raised when
=====================  ============================================================
``MQClientError``      base class; also bad arguments, no route, no broker address,
                       a message that fails validation (too big, bad topic, …)
``MQBrokerError``      a broker or name server answered a non-success response code;
                       carries ``code`` (RocketMQ's number), ``remark`` and ``addr``
``RemotingError``      the request did not get an answer (base of the two below)
``RemotingConnectError``  cannot connect, or the connection closed before the answer
``RemotingTimeoutError``  no answer within the timeout
``RequestTimeoutError``   a request-reply's reply did not come within its timeout
=====================  ============================================================

``str(MQBrokerError)`` reads ``"TOPIC_NOT_EXIST (17): No topic route info …"``.
"""

from __future__ import annotations

from pumice.remoting.response_code import ResponseCode


class MQClientError(Exception):
    """Base of every error the client raises."""


def code_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return "UNKNOWN"


class MQBrokerError(MQClientError):
    """A non-success response code from a broker or a name server."""

    def __init__(self, code: int, remark: str | None = None, addr: str | None = None) -> None:
        self.code = int(code)
        self.remark = remark or ""
        self.addr = addr
        super().__init__(str(self))

    @property
    def code_name(self) -> str:
        return code_name(self.code)

    def __str__(self) -> str:
        return f"{self.code_name} ({self.code}): {self.remark}"


class RemotingError(MQClientError):
    """The request got no answer; ``addr`` is the peer."""

    def __init__(self, message: str, addr: str | None = None) -> None:
        self.addr = addr
        super().__init__(message)


class RemotingConnectError(RemotingError):
    """Connecting failed, or the connection closed while a request was outstanding."""


class RemotingTimeoutError(RemotingError):
    """No answer within the request's timeout."""


class RequestTimeoutError(MQClientError):
    """``producer.request``: the request was sent, but no reply came within its timeout."""
