"""`pumice broker -c` on each sample conf of the RocketMQ 4.9.8 distribution
(tests/data/rocketmq-4.9.8-conf): each starts and registers as the sample says; the three of
conf/dledger start as one DLedger group (a master and two slaves of RaftNode00)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from tests.helpers.clusters import running_namesrv, start, stop
from tests.helpers.ports import free_port
from tests.helpers.waiting import eventually

SAMPLES = Path(__file__).resolve().parent.parent / "data" / "rocketmq-4.9.8-conf"
STARTING = sorted(p for p in SAMPLES.rglob("*") if p.suffix in (".conf", ".properties") and p.parent.name != "dledger")
DLEDGER = sorted((SAMPLES / "dledger").glob("*.conf"))


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_namesrv(tmp_path_factory.mktemp("namesrv")) as addr:
        yield addr


def cluster_info(namesrv: str) -> dict:
    async def main() -> dict:
        c = RemotingClient()
        try:
            r = await c.invoke(namesrv, RemotingCommand(code=RequestCode.GET_BROKER_CLUSTER_INFO))
            return orjson.loads(r.body)
        finally:
            await c.close()

    return asyncio.run(main())


def test_the_samples_are_all_there() -> None:
    assert len(STARTING) == 12 and len(DLEDGER) == 3


@pytest.mark.parametrize("sample", STARTING, ids=lambda p: str(p.relative_to(SAMPLES)))
def test_each_sample_starts_the_broker_it_describes(sample: Path, namesrv: str, tmp_path: Path) -> None:
    """The sample as it ships, then the lines a test needs (a later line wins, as in Java's
    Properties): a temporary store, free loopback ports, this name server, small files."""
    port = free_port()
    conf = tmp_path / sample.name
    conf.write_text(
        sample.read_text(encoding="utf-8")
        + f"\n# the test's own\nstorePathRootDir={tmp_path / 'store'}\nlistenPort={port}\nlistenHost=127.0.0.1\n"
        f"brokerIP1=127.0.0.1\nnamesrvAddr={namesrv}\nmappedFileSizeCommitLog=1048576\npreallocateCommitLog=false\n"
        "prefaultCommitLog=false\n",
        encoding="utf-8",
    )
    name = "broker-a" if sample.name == "broker.conf" else sample.stem.removesuffix("-s")
    broker_id = "1" if sample.stem.endswith("-s") else "0"
    proc = start(["broker", "-c", str(conf)], "boot success")
    try:

        def registered() -> bool:
            info = cluster_info(namesrv)
            addrs = info["brokerAddrTable"].get(name, {}).get("brokerAddrs", {})
            return addrs.get(broker_id) == f"127.0.0.1:{port}" and name in info["clusterAddrTable"]["DefaultCluster"]

        eventually(registered, what=f"{name}[{broker_id}] registered")
    finally:
        stop(proc)
    out = "".join(proc.output_lines)  # type: ignore[attr-defined]
    assert "Traceback" not in out and "has no effect in Pumice" not in out  # each of the sample's keys is used


def test_the_dledger_samples_start_as_one_group(namesrv: str, tmp_path: Path) -> None:
    """The three samples as they ship, then the test's own lines: free loopback ports for the
    brokers and for dLegerPeers, a temporary store, this name server."""
    dledger_ports = [free_port() for _ in DLEDGER]
    peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(dledger_ports))
    ports = [free_port() for _ in DLEDGER]
    procs = []
    try:
        for i, sample in enumerate(DLEDGER):
            conf = tmp_path / sample.name
            conf.write_text(
                sample.read_text(encoding="utf-8") + f"\n# the test's own\nstorePathRootDir={tmp_path / f'n{i}'}\n"
                f"storePathCommitLog={tmp_path / f'n{i}' / 'commitlog'}\nlistenPort={ports[i]}\n"
                f"listenHost=127.0.0.1\nbrokerIP1=127.0.0.1\nnamesrvAddr={namesrv}\ndLegerPeers={peers}\n"
                "mappedFileSizeCommitLog=1048576\nfastListenPortEnable=false\n",
                encoding="utf-8",
            )
            procs.append(start(["broker", "-c", str(conf)], "boot success"))

        def formed() -> bool:
            addrs = cluster_info(namesrv)["brokerAddrTable"].get("RaftNode00", {}).get("brokerAddrs", {})
            return len(addrs) == 3 and "0" in addrs

        eventually(formed, 30, what="RaftNode00: a master and two slaves")
    finally:
        for proc in procs:
            stop(proc)
    for proc in procs:  # (sendMessageThreadPoolNums=16 is named as having no effect: sends run on the loop)
        assert "Traceback" not in "".join(proc.output_lines)  # type: ignore[attr-defined]
