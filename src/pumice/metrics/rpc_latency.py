"""RpcLatency: each answered request's processing time, by request code, response code and result.

``record`` is the RemotingServer's ``on_rpc_done`` hook (one bucket count per answered request);
``series`` gives 5.x's labels of ``rocketmq_rpc_latency_milliseconds``: ``protocol_type`` ``remoting``,
``request_code`` and ``response_code`` as RemotingHelper names them (the code's constant name
in lower case, the number for one without a name), ``is_long_polling``, and ``result``
(``success``, or ``oneway`` for a request that gets no answer).

A pull parked by long polling is answered later, outside the processor's run, and is not timed
here (5.x times it with ``is_long_polling=true``).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from functools import cache
from typing import cast

from pumice.metrics.histogram import RPC_LATENCY_BOUNDS_MS, observe
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode


@cache
def request_code_desc(code: int) -> str:
    try:
        return RequestCode(code).name.lower()
    except ValueError:
        return str(code)


@cache
def response_code_desc(code: int) -> str:
    try:
        return ResponseCode(code).name.lower()
    except ValueError:
        return str(code)


class RpcLatency:
    def __init__(self) -> None:
        self.table: dict[Hashable, list[float]] = {}

    def record(self, request: RemotingCommand, response: RemotingCommand, took_s: float) -> None:
        observe(self.table, (request.code, response.code, request.is_oneway), took_s * 1000.0, RPC_LATENCY_BOUNDS_MS)

    def series(self) -> Iterator[tuple[tuple[str, ...], list[float]]]:
        for key, counts in list(self.table.items()):
            code, response_code, oneway = cast(tuple[int, int, bool], key)
            labels = ("remoting", request_code_desc(code), response_code_desc(response_code), "false",
                      "oneway" if oneway else "success")  # fmt: skip
            yield labels, list(counts)
