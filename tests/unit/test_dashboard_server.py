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


def test_another_site_s_requests_are_refused() -> None:
    """No login: a cross-site form POST (CSRF) and a rebinding Host are refused before any handler."""
    nowhere = f"127.0.0.1:{free_port()}"

    def fetch(port: int, path: str, method: str = "GET", **headers: str) -> tuple[int, str]:
        req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method, headers=headers,
                                     data=b"confirm=yes" if method == "POST" else None)  # fmt: skip
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    async def main() -> None:
        server = DashboardServer(nowhere, port=0, sample_interval_s=60)
        await server.start()
        try:
            p = server.port
            status, text = await asyncio.to_thread(fetch, p, "/topic/T/delete", "POST", Origin="http://evil.example")
            assert status == 403 and "http://evil.example is refused" in text, text
            status, text = await asyncio.to_thread(
                fetch, p, "/topic/T/delete", "POST", **{"Sec-Fetch-Site": "cross-site"}
            )
            assert status == 403 and "another site" in text, text
            status, text = await asyncio.to_thread(fetch, p, "/charts", Host=f"rebind.example:{p}")
            assert status == 403 and "rebind.example" in text, text
            # its own pages: the same origin, and a loopback name
            for host in (f"127.0.0.1:{p}", f"localhost:{p}"):
                status, _ = await asyncio.to_thread(fetch, p, "/charts", Host=host)
                assert status == 200
            own = f"http://127.0.0.1:{p}"
            status, text = await asyncio.to_thread(fetch, p, "/topic/T/delete", "POST", Origin=own)
            assert status != 403 and "Forbidden" not in text, text  # past the guard, to the handler
        finally:
            await server.shutdown()

    asyncio.run(main())


@pytest.mark.parametrize(
    ("method", "headers", "loopback", "refused"),
    [
        ("GET", {"host": "127.0.0.1:8080"}, True, False),
        ("GET", {"host": "[::1]:8080"}, True, False),
        ("GET", {"host": "attacker.example"}, True, True),
        ("GET", {"host": "dash.example.com:8080"}, False, False),  # bound elsewhere: any name
        ("POST", {"host": "127.0.0.1:8080", "origin": "http://127.0.0.1:8080"}, True, False),
        ("POST", {"host": "127.0.0.1:8080", "origin": "http://127.0.0.1:9999"}, True, True),
        ("POST", {"host": "127.0.0.1:8080"}, True, False),  # no Origin: not a browser
        ("POST", {"host": "dash.example.com", "sec-fetch-site": "cross-site"}, False, True),
    ],
)
def test_same_origin_rules(method: str, headers: dict[str, str], loopback: bool, refused: bool) -> None:
    from pumice.dashboard.same_origin import refusal

    assert (refusal(method, headers, loopback) is not None) == refused
