"""POP on a DLedger broker: the revive service is a master service, started by the role change
that makes a DLedger node leader (no node is master at start), so a message popped and not
acked comes back there as on a master-slave broker."""

from __future__ import annotations

from pathlib import Path

from pumice.remoting.remoting_client import RemotingClient
from tests.helpers import pop_client
from tests.helpers.clusters import run, running_namesrv
from tests.helpers.dledger_brokers import GROUP, DLedgerBrokers, wait_members
from tests.helpers.pop_client import send_all


def test_a_dledger_leader_revives_what_was_not_acked(tmp_path: Path) -> None:
    with running_namesrv(tmp_path) as ns:
        group = DLedgerBrokers(tmp_path, ns, n=1, extra_conf="reviveInterval=200\n")
        try:

            async def main() -> None:
                client = RemotingClient()
                try:
                    formed = await wait_members(client, ns, lambda m: "0" in m, 30, "a leader")
                finally:
                    await client.close()
                c = await pop_client.setup(ns, formed["0"], "PopRaft", "GRaft", broker_name=GROUP)
                try:
                    await send_all(c, "PopRaft", [b"keep", b"lose"])
                    first = await c.pop_until("GRaft", "PopRaft", 2, timeout_s=10, invisible_ms=1000)
                    assert sorted(p.body for p in first) == [b"keep", b"lose"]
                    keep = next(p for p in first if p.body == b"keep")
                    assert (await c.ack("GRaft", "PopRaft", keep)).code == 0
                    back = await c.pop_until("GRaft", "PopRaft", 1, timeout_s=15, invisible_ms=1000)
                    assert [(p.body, p.msg.reconsume_times) for p in back] == [(b"lose", 1)]
                finally:
                    await c.close()

            run(main(), 90)
        finally:
            group.close()
