"""DashboardServer and pumice dev's dashboard service: a taken port is an OSError, or, on the
default port, a line in the banner instead of a failed start."""

from __future__ import annotations

import asyncio
import socket
import urllib.request

import pytest

from pumice.dashboard import server as server_module
from pumice.dashboard.server import DashboardServer, dev_dashboard
from tests.helpers.ports import free_port


def held_port() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def test_a_taken_port_is_an_os_error_and_a_free_one_serves() -> None:
    nowhere = f"127.0.0.1:{free_port()}"

    async def main() -> None:
        with held_port() as s:
            with pytest.raises(OSError):
                await DashboardServer(nowhere, port=s.getsockname()[1]).start()
        server = DashboardServer(nowhere, port=0, sample_interval_s=60)
        await server.start()
        try:
            assert server.port > 0 and f"http://127.0.0.1:{server.port}/" in server.banner()
            html = await asyncio.to_thread(
                lambda: urllib.request.urlopen(f"http://127.0.0.1:{server.port}/charts", timeout=10).read()
            )
            assert b"The last hour" in html
        finally:
            await server.shutdown()

    asyncio.run(asyncio.wait_for(main(), 30))


def test_dev_dashboard_on_a_taken_default_port_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> None:
        with held_port() as s:
            port = s.getsockname()[1]
            monkeypatch.setattr(server_module, "DEFAULT_PORT", port)
            start, shutdown, banner = dev_dashboard(lambda: "127.0.0.1:1", None)
            await start()
            assert banner().startswith(f"dashboard not started: 127.0.0.1:{port} is taken")
            await shutdown()
            start, shutdown, banner = dev_dashboard(lambda: "127.0.0.1:1", port)  # asked for: an error
            with pytest.raises(OSError):
                await start()

    asyncio.run(asyncio.wait_for(main(), 30))
