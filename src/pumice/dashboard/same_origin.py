"""SameOriginGuard: the dashboard's requests come from its own pages, not from another site.

The dashboard has no login (as rocketmq-dashboard's default) and its POSTs change the cluster
(delete a topic, reset offsets, write ACL accounts). A page of any other site open in the
operator's browser could post a form to ``http://127.0.0.1:8080`` (cross-site request forgery),
or reach it under a name of its own that resolves to 127.0.0.1 (DNS rebinding). An ASGI
middleware refuses both with 403 and the reason:

==================================  =============================================================
request                             refused when
==================================  =============================================================
any, when bound to a loopback       its ``Host`` names neither an IP address nor ``localhost``
address                             (a rebinding name)
POST (anything but GET and HEAD)    ``Sec-Fetch-Site: cross-site``, or an ``Origin`` whose
                                    host:port is not the request's ``Host``
==================================  =============================================================

Browsers send ``Origin`` with every POST; a client that sends none (curl) is let through.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _hostname(host_port: str) -> str:
    return urlsplit(f"//{host_port}").hostname or ""


def _is_ip_or_localhost(name: str) -> bool:
    if name == "localhost":
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def refusal(method: str, headers: dict[str, str], loopback_bound: bool) -> str | None:
    """Why this request is refused, or None."""
    host = headers.get("host", "")
    if loopback_bound and not _is_ip_or_localhost(_hostname(host)):
        return f"Host {host!r} is not this machine's address: the dashboard answers 127.0.0.1 or localhost"
    if method in ("GET", "HEAD"):
        return None
    if headers.get("sec-fetch-site") == "cross-site":
        return "a request from another site is refused"
    origin = headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != host:
        return f"a request from {origin} is refused: only the dashboard's own pages may change the cluster"
    return None


class SameOriginGuard:
    def __init__(self, app: ASGIApp, loopback_bound: bool) -> None:
        self.app = app
        self.loopback_bound = loopback_bound

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            why = refusal(scope["method"], headers, self.loopback_bound)
            if why is not None:
                body = f"Forbidden: {why}\n".encode()
                await send({"type": "http.response.start", "status": 403,
                            "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                        (b"content-length", str(len(body)).encode())]})  # fmt: skip
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
