"""TlsStream: TLS over a blocking socket, for one reader thread and one writer thread at once.

The HA port's connections are threads on blocking sockets (a reader and a writer each), not
asyncio. An ``ssl.SSLSocket`` must not be read and written from two threads at once (one
OpenSSL object), so the TLS state is an ``ssl.SSLObject`` over two memory BIOs, used under a
lock, with the socket I/O outside it:

- a read takes the records the socket delivered and decrypts them; the socket is read only
  when the SSLObject wants more, and never under the lock, so a blocked read does not stop
  the writer;
- a write encrypts and sends under the send lock; anything a read produced (a TLS 1.3 key
  update's answer, a session ticket) is sent under the same lock, so records leave in the
  order they were made.

The methods the HA code uses on a socket (``recv``, ``sendall``, ``sendmsg``, ``settimeout``,
``setsockopt``, ``shutdown``, ``close``) keep their socket meaning: ``recv`` answers b"" when
the peer closed; a timeout raises TimeoutError; a TLS failure raises ``ssl.SSLError`` (an
OSError).
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterable
from typing import Any

RECV_SIZE = 64 * 1024
Buffer = bytes | bytearray | memoryview


class TlsStream:
    def __init__(
        self, sock: socket.socket, context: ssl.SSLContext, server_side: bool, host: str | None = None
    ) -> None:
        self.sock = sock
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        server_hostname = host if (not server_side and context.check_hostname) else None
        self._ssl = context.wrap_bio(self._incoming, self._outgoing, server_side=server_side,
                                     server_hostname=server_hostname)  # fmt: skip
        self._lock = threading.Lock()  # the SSLObject and its BIOs
        self._send_lock = threading.Lock()  # the socket's write side, in record order

    # -- TLS -----------------------------------------------------------------------------

    def do_handshake(self) -> None:
        """Blocks until the handshake is done (the socket's timeout bounds each read)."""
        while True:
            with self._lock:
                try:
                    self._ssl.do_handshake()
                    done = True
                except ssl.SSLWantReadError:
                    done = False
            self._flush()
            if done:
                return
            self._fill("handshake")

    def _fill(self, during: str) -> bool:
        """Feed the socket's next bytes to the SSLObject; False when the peer closed."""
        raw = self.sock.recv(RECV_SIZE)
        with self._lock:
            if raw:
                self._incoming.write(raw)
            else:
                self._incoming.write_eof()
        if not raw and during == "handshake":
            raise ConnectionResetError("the peer closed the connection during the TLS handshake")
        return bool(raw)

    def _flush(self) -> None:
        with self._send_lock:
            with self._lock:
                out = self._outgoing.read()
            if out:
                self.sock.sendall(out)

    # -- the socket's methods ------------------------------------------------------------

    def recv(self, size: int) -> bytes:
        while True:
            with self._lock:
                try:
                    data = self._ssl.read(size)
                except ssl.SSLWantReadError:
                    data = None
                except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                    data = b""  # close_notify, or the socket's end: closed, as a plain recv says
                pending = self._outgoing.pending
            if pending:
                try:
                    self._flush()
                except OSError:
                    if data != b"":  # the peer is gone: its end is the answer, not the failed send
                        raise
            if data is not None:
                return data
            self._fill("read")

    def sendall(self, data: Buffer) -> None:
        view = memoryview(data).cast("B")
        with self._send_lock:
            with self._lock:
                pos = 0
                while pos < len(view):
                    pos += self._ssl.write(view[pos:])
                out = self._outgoing.read()
            self.sock.sendall(out)

    def sendmsg(self, parts: Iterable[Buffer]) -> int:
        """All of ``parts`` (the HA frame's header and body), as one write; their total length."""
        data = b"".join(parts)
        self.sendall(data)
        return len(data)

    def settimeout(self, timeout: float | None) -> None:
        self.sock.settimeout(timeout)

    def setsockopt(self, *args: Any) -> None:
        self.sock.setsockopt(*args)

    def shutdown(self, how: int) -> None:
        self.sock.shutdown(how)

    def close(self) -> None:
        self.sock.close()

    def version(self) -> str | None:
        return self._ssl.version()
