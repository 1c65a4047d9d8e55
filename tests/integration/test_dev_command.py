"""`pumice dev`, the README's main job: a name server and a broker in one process."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from tests.helpers.clusters import send, start
from tests.helpers.ports import free_port


def test_pumice_dev_serves_and_stops_cleanly(tmp_path: Path) -> None:
    ns, br = free_port(), free_port()
    store = tmp_path / "store"
    # its banner comes after the INFO lines of the start (bounded: start() reads for 30 s at most)
    # --no-proxy: 8081, the gRPC endpoint's default, is the README test's
    proc = start(["dev", "--store-dir", str(store), "--namesrv-port", str(ns), "--broker-port", str(br),
                  "--no-proxy", "--no-dashboard"], "Ctrl-C stops")  # fmt: skip
    try:
        assert any(line.startswith("name server on 127.0.0.1:") for line in proc.output_lines)  # type: ignore[attr-defined]

        async def main() -> None:
            c = RemotingClient()
            try:
                r = await c.invoke(f"127.0.0.1:{br}", send("DevTopic", b"hi", "dk"))
                assert r.code == 0, r.remark
                for _ in range(50):
                    route = await c.invoke(
                        f"127.0.0.1:{ns}", RemotingCommand(code=105, ext_fields={"topic": "DevTopic"})
                    )
                    if route.code == 0:
                        break
                    await asyncio.sleep(0.1)
                assert route.code == 0
            finally:
                await c.close()

        asyncio.run(asyncio.wait_for(main(), 30))
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
        assert (store / "commitlog").is_dir() and not (store / "abort").exists()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_pumice_dev_dledger_3_starts_a_group_that_elects_a_master(tmp_path: Path) -> None:
    """`pumice dev --dledger 3`: a newcomer's DLedger group on loopback; the name server lists a
    master and two slaves, the master takes a send, Ctrl-C stops all of it cleanly."""
    from tests.helpers.dledger_brokers import members, wait_members

    ns, br, dl = free_port(), free_port(), free_port()  # dl: dl .. dl + 2 free; br + 10 and br + 20 most likely
    store = tmp_path / "store"
    proc = start(["dev", "--store-dir", str(store), "--namesrv-port", str(ns), "--broker-port", str(br),
                  "--dledger", "3", "--dledger-port", str(dl), "--no-proxy", "--no-dashboard"],
                 "Ctrl-C stops")  # fmt: skip
    try:
        assert sum("DLedger node n" in line for line in proc.output_lines) == 3  # type: ignore[attr-defined]

        async def main() -> None:
            c = RemotingClient()
            try:
                nsaddr = f"127.0.0.1:{ns}"
                formed = await wait_members(c, nsaddr, lambda m: len(m) == 3 and "0" in m, 30, "a master")
                assert set(formed.values()) == {f"127.0.0.1:{br + 10 * i}" for i in range(3)}
                r = await c.invoke(formed["0"], send("DevTopic", b"hi", "dk"))
                assert r.code == 0, r.remark
                assert len(await members(c, nsaddr)) == 3
            finally:
                await c.close()

        asyncio.run(asyncio.wait_for(main(), 60))
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
        assert all((store / f"n{i}" / f"dledger-n{i}" / "data").is_dir() for i in range(3))
    finally:
        if proc.poll() is None:
            proc.kill()
