"""docs/COMPATIBILITY.md's request-code table against a running name server and broker.

Every request code of RocketMQ 4.9.8 (tests/data) has a row; each is sent, with no fields, to
both processes, and the answer must be what the row says: a code Pumice serves gets anything
but REQUEST_CODE_NOT_SUPPORTED from the process named, and a code it does not serve gets
REQUEST_CODE_NOT_SUPPORTED (or the refusal the row names) from both.
"""

from __future__ import annotations

import asyncio

from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clusters import Cluster
from tests.helpers.request_codes import rocketmq_codes, table


def test_every_request_code_of_4_9_8_has_a_row() -> None:
    rows = table()
    assert {n: r[0] for n, r in rows.items()} == rocketmq_codes()


def test_the_table_says_what_the_processes_answer(cluster: Cluster) -> None:
    rows = table()

    async def ask(rc: RemotingClient, addr: str, code: int) -> int:
        r = await rc.invoke(addr, RemotingCommand(code=code, ext_fields={}), 5)
        return r.code

    async def main() -> list[str]:
        wrong: list[str] = []
        rc = RemotingClient()
        try:
            for code, (name, _rocketmq, pumice) in sorted(rows.items()):
                broker, namesrv = await ask(rc, cluster.br, code), await ask(rc, cluster.ns, code)
                unsupported = ResponseCode.REQUEST_CODE_NOT_SUPPORTED
                if pumice.startswith("served (broker"):
                    ok = broker != unsupported and namesrv == unsupported
                elif pumice.startswith("served (name server"):
                    ok = namesrv != unsupported and broker == unsupported
                elif pumice.startswith("refused with NO_PERMISSION"):
                    ok = broker == ResponseCode.NO_PERMISSION and namesrv == unsupported
                else:  # not served, not sent, client side, or unsupported as in 4.9
                    ok = broker == unsupported and namesrv == unsupported
                if not ok:
                    wrong.append(f"{code} {name}: the table says {pumice!r}; broker answered {broker}, "
                                 f"name server {namesrv}")  # fmt: skip
        finally:
            await rc.close()
        return wrong

    wrong = asyncio.run(asyncio.wait_for(main(), 120))
    assert not wrong, "\n".join(wrong)
