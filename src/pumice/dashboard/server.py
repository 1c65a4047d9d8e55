"""DashboardServer: the dashboard's HTTP server (uvicorn) on the running event loop, as a
(start, shutdown, banner) service of ``pumice dashboard`` and ``pumice dev``.

It binds 127.0.0.1 by default: the dashboard has no authentication (as rocketmq-dashboard's
default), so whoever reaches its port administers the cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable, Iterator

import uvicorn

from pumice.dashboard.app import create_app

DEFAULT_PORT = 8080  # rocketmq-dashboard's


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:  # the process's own handlers stop it
        yield


class DashboardServer:
    def __init__(
        self, namesrv_addr: str, host: str = "127.0.0.1", port: int = DEFAULT_PORT, sample_interval_s: float = 10.0,
        access_key: str | None = None, secret_key: str | None = None,
    ):  # fmt: skip
        self.namesrv_addr = namesrv_addr
        self.host = host
        self.port = port
        config = uvicorn.Config(
            create_app(namesrv_addr, sample_interval_s, access_key, secret_key, host), host=host, port=port,
            log_level="warning",
            lifespan="on", access_log=False,
        )  # fmt: skip
        self._server = _Server(config)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        # bound here: a port in use is an OSError for the caller (uvicorn's own bind exits the process)
        sock = socket.create_server(
            (self.host, self.port), family=socket.AF_INET6 if ":" in self.host else socket.AF_INET
        )
        self.port = sock.getsockname()[1]
        self._task = asyncio.get_running_loop().create_task(self._server.serve(sockets=[sock]), name="dashboard")
        while not self._server.started:
            if self._task.done():
                self._task.result()
                raise RuntimeError("the dashboard stopped while starting")
            await asyncio.sleep(0.02)

    async def shutdown(self) -> None:
        if self._task is not None:
            self._server.should_exit = True
            await self._task
            self._task = None

    def banner(self) -> str:
        return (
            f"dashboard on http://{self.host}:{self.port}/ (name server {self.namesrv_addr}; no authentication: "
            "bind it to 127.0.0.1 unless every host that reaches it may administer the cluster)"
        )


def dev_dashboard(
    namesrv_addr: Callable[[], str], port: int | None
) -> tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]], Callable[[], str]]:
    """pumice dev's dashboard as a (start, shutdown, banner) service after the broker's; on its
    default port (8080) a port in use is a line in the banner, not a failed start (as the proxy's)."""
    holder: list[DashboardServer] = []
    note: list[str] = []

    async def start() -> None:
        server = DashboardServer(namesrv_addr(), "127.0.0.1", DEFAULT_PORT if port is None else port)
        try:
            await server.start()
        except OSError as e:
            if port is not None:
                raise
            note.append(f"dashboard not started: 127.0.0.1:{DEFAULT_PORT} is taken ({e.strerror}); "
                        "--dashboard-port chooses another")  # fmt: skip
            return
        holder.append(server)

    async def shutdown() -> None:
        for server in holder:
            await server.shutdown()

    return start, shutdown, lambda: holder[0].banner() if holder else note[0]
