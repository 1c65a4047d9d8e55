"""`pumice broker` and `pumice dev` say in one start-up line which data plane runs: the native
one (pumice._native) or the pure-Python twins (no extension built, or PUMICE_PURE=1)."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import pytest

from pumice.remoting.remoting_client import RemotingClient
from tests.helpers.clusters import send, start, stop
from tests.helpers.ports import free_port


def _plane_lines(proc: object) -> list[str]:
    return [line for line in proc.output_lines if "data plane:" in line]  # type: ignore[attr-defined]


def test_pumice_broker_says_the_pure_python_path_runs_and_serves_on_it(tmp_path: Path) -> None:
    port = free_port()
    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"brokerName=broker-p\nlistenPort={port}\nlistenHost=127.0.0.1\nbrokerIP1=127.0.0.1\n"
        f"storePathRootDir={tmp_path / 'store'}\nmapedFileSizeCommitLog=1048576\nflushDiskType=ASYNC_FLUSH\n"
        "fastListenPortEnable=false\n"
    )
    proc = start(["broker", "-c", str(conf)], "boot success", env={"PUMICE_PURE": "1"})
    try:
        lines = _plane_lines(proc)
        assert len(lines) == 1, lines
        assert "pure Python (PUMICE_PURE=1)" in lines[0] and "PUMICE_PURE=1 forces" in lines[0]

        async def main() -> None:
            c = RemotingClient()
            try:
                r = await c.invoke(f"127.0.0.1:{port}", send("PureTopic", b"hi", "pk"))
                assert r.code == 0, r.remark
            finally:
                await c.close()

        asyncio.run(asyncio.wait_for(main(), 30))
    finally:
        stop(proc)


@pytest.mark.skipif(importlib.util.find_spec("pumice._native") is None, reason="pumice._native is not built")
def test_pumice_dev_says_the_native_path_runs(tmp_path: Path) -> None:
    ns, br = free_port(), free_port()
    # --no-proxy: 8081, the gRPC endpoint's default, is the README test's
    args = ["dev", "--store-dir", str(tmp_path / "store"), "--namesrv-port", str(ns), "--broker-port", str(br),
            "--no-proxy", "--no-dashboard"]  # fmt: skip
    proc = start(args, "Ctrl-C stops", env={"PUMICE_PURE": "0"})
    try:
        lines = _plane_lines(proc)
        assert len(lines) == 1, lines
        assert "data plane: native (pumice._native)" in lines[0]
    finally:
        stop(proc)
