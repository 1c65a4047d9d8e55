"""TLS on a RemotingServer's port, as RocketMQ 4.9's ``tls.server.mode``.

==============  ===========================================================================
tlsMode         what a new connection gets
==============  ===========================================================================
disabled        plain (the default here; 4.9's is permissive with a test certificate)
permissive      its first byte decides: 0x16 (a TLS handshake record) TLS, anything else plain
enforcing       TLS; a connection whose first byte is not 0x16 is closed
==============  ===========================================================================

Without certificate files, ``tlsTestModeEnable`` (true, as 4.9) serves a self-signed test
certificate made at start (4.9's Netty SelfSignedCertificate: CN localhost, a year long),
which only clients that trust any certificate accept (4.9's client default); with it false,
permissive serves plain only (a warning) and enforcing does not start.

Keys (broker.conf and namesrv.conf; 4.9 reads the same from ``-Dtls.server.*`` or
tls.properties): ``tlsServerCertPath`` and ``tlsServerKeyPath`` (PEM; required unless disabled),
``tlsServerTrustCertPath`` (CA file for client certificates; keys with a password are not
taken: the config is listed over the wire by GET_BROKER_CONFIG),
``tlsServerNeedClientAuth`` (``none``, ``optional``, ``require``). A certificate, key or trust
file that changes is loaded for new connections within a second; one that does not load keeps
the previous context (logged). Open connections keep theirs.
"""

from __future__ import annotations

import datetime
import logging
import os
import socket
import ssl
import tempfile
from dataclasses import dataclass
from typing import Any

from pumice.common.file_watch import FileWatchService
from pumice.remoting.tls_stream import TlsStream

log = logging.getLogger(__name__)

TLS_RECORD_HANDSHAKE = 0x16
MODES = ("disabled", "permissive", "enforcing")
CLIENT_AUTH = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "require": ssl.CERT_REQUIRED}
WATCH_INTERVAL_S = 1.0


class TlsConfigError(ValueError):
    """TLS settings that cannot serve: a bad mode, a missing or unreadable file."""


@dataclass(frozen=True)
class TlsSettings:
    mode: str = "disabled"
    cert_path: str | None = None
    key_path: str | None = None
    trust_cert_path: str | None = None
    need_client_auth: str = "none"
    test_mode: bool = True

    @property
    def has_files(self) -> bool:
        return bool(self.cert_path and self.key_path)

    @property
    def enabled(self) -> bool:
        """TLS is served: enforcing, or permissive with a certificate or the test one (a
        permissive broker.conf with neither serves plain only, with a warning)."""
        if self.mode == "permissive":
            return self.has_files or self.test_mode
        return self.mode == "enforcing"

    def check(self) -> None:
        if self.mode not in MODES:
            raise TlsConfigError(f"tlsMode={self.mode}: expected one of {', '.join(MODES)}")
        if self.need_client_auth not in CLIENT_AUTH:
            raise TlsConfigError(f"tlsServerNeedClientAuth={self.need_client_auth}: expected none, optional or require")
        if self.mode == "enforcing" and not self.has_files and not self.test_mode:
            raise TlsConfigError(
                f"tlsMode={self.mode} with tlsTestModeEnable=false needs tlsServerCertPath and tlsServerKeyPath "
                "(PEM files)"
            )
        if bool(self.cert_path) != bool(self.key_path):
            raise TlsConfigError("tlsServerCertPath and tlsServerKeyPath go together: give both or neither")
        if self.need_client_auth != "none" and not self.trust_cert_path:
            raise TlsConfigError(f"tlsServerNeedClientAuth={self.need_client_auth} needs tlsServerTrustCertPath")

    def files(self) -> list[str]:
        return [p for p in (self.cert_path, self.key_path, self.trust_cert_path) if p]

    def server_context(self) -> ssl.SSLContext:
        """A server context from the files; TlsConfigError naming the file that does not load."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        if not self.has_files:
            load_test_certificate(ctx)
        else:
            assert self.cert_path and self.key_path
            try:
                ctx.load_cert_chain(self.cert_path, self.key_path)
            except (OSError, ssl.SSLError) as e:
                raise TlsConfigError(
                    f"tlsServerCertPath {self.cert_path} / tlsServerKeyPath {self.key_path}: {e}"
                ) from e
        ctx.verify_mode = CLIENT_AUTH[self.need_client_auth]
        if self.trust_cert_path:
            try:
                ctx.load_verify_locations(self.trust_cert_path)
            except (OSError, ssl.SSLError) as e:
                raise TlsConfigError(f"tlsServerTrustCertPath {self.trust_cert_path}: {e}") from e
        return ctx


def test_certificate_pem() -> tuple[bytes, bytes]:
    """A new self-signed certificate and its key, PEM (tlsTestModeEnable: 4.9's Netty
    SelfSignedCertificate, CN localhost, a year long), made in memory."""
    from cryptography import x509  # only a test-mode start needs it
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )  # fmt: skip
    log.warning("TLS with a self-signed test certificate (tlsTestModeEnable=true, no tlsServerCertPath): "
                "clients cannot verify it")  # fmt: skip
    return cert.public_bytes(serialization.Encoding.PEM), key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def load_test_certificate(ctx: ssl.SSLContext) -> None:
    """A new self-signed certificate into ``ctx``, handed to OpenSSL through a private
    temporary directory (it only loads files), removed at once."""
    cert, key = test_certificate_pem()
    with tempfile.TemporaryDirectory(prefix="pumice-tls-") as d:
        path = os.path.join(d, "test.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(cert + key)
        ctx.load_cert_chain(path)


@dataclass
class TlsServerConfig:
    """The TLS keys of broker.conf and namesrv.conf (a base of BrokerConfig and NamesrvConfig)."""

    tls_mode: str = "disabled"
    tls_server_cert_path: str | None = None
    tls_server_key_path: str | None = None
    tls_server_trust_cert_path: str | None = None
    tls_server_need_client_auth: str = "none"
    tls_test_mode_enable: bool = True

    def tls_settings(self) -> TlsSettings:
        return TlsSettings(
            mode=self.tls_mode.strip().lower(),
            cert_path=self.tls_server_cert_path or None,
            key_path=self.tls_server_key_path or None,
            trust_cert_path=self.tls_server_trust_cert_path or None,
            need_client_auth=self.tls_server_need_client_auth.strip().lower(),
            test_mode=self.tls_test_mode_enable,
        )


def client_context(
    ca_file: str | None = None, cert_file: str | None = None, key_file: str | None = None, verify: bool = True
) -> ssl.SSLContext:
    """A client's context: the server's certificate checked against ``ca_file`` (else the
    system's CAs) and its host name, unless ``verify`` is False (4.9's client default: trust
    any); ``cert_file``/``key_file`` for servers that ask for a client certificate."""
    ctx = ssl.create_default_context(cafile=ca_file) if verify else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_file:
        ctx.load_cert_chain(cert_file, key_file)
    return ctx


class TlsContextHolder:
    """The server context in force, rebuilt when one of its files changes (4.9's FileWatchService)."""

    def __init__(self, settings: TlsSettings) -> None:
        settings.check()
        self.settings = settings
        self.context = settings.server_context()
        self._stamps = self._read_stamps()
        self._watcher: FileWatchService | None = None

    def _read_stamps(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for path in self.settings.files():
            try:
                out[path] = os.stat(path).st_mtime
            except OSError:
                out[path] = None
        return out

    def reload_if_changed(self) -> bool:
        stamps = self._read_stamps()
        if stamps == self._stamps:
            return False
        self._stamps = stamps
        try:
            self.context = self.settings.server_context()
        except TlsConfigError as e:
            log.error("TLS files not reloaded, new connections keep the previous certificate: %s", e)
            return False
        log.info("TLS certificate reloaded from %s", ", ".join(self.settings.files()))
        return True

    def start_watching(self, interval_s: float = WATCH_INTERVAL_S) -> None:
        self._watcher = FileWatchService(self.reload_if_changed, interval_s, "TlsFileWatchService")
        self._watcher.start()

    def shutdown(self) -> None:
        if self._watcher is not None:
            self._watcher.shutdown()


def start_tls(settings: TlsSettings, servers: list[Any]) -> TlsContextHolder | None:
    """The context holder the ``servers`` (RemotingServer) accept with, watching its files; None
    when TLS is not served. RuntimeError naming the file when one does not load."""
    if settings.mode == "permissive" and not settings.enabled:
        log.warning("tlsMode=permissive without tlsServerCertPath/tlsServerKeyPath and tlsTestModeEnable=false: "
                    "plain connections only")  # fmt: skip
    if not settings.enabled:
        return None
    try:
        holder = TlsContextHolder(settings)
    except TlsConfigError as e:
        raise RuntimeError(f"TLS cannot start: {e}") from e
    for server in servers:
        server.tls = holder
    holder.start_watching()
    return holder


def accept_blocking(holder: TlsContextHolder, sock: socket.socket) -> socket.socket | TlsStream | None:
    """A blocking server socket's connection as its mode says (the HA port; RemotingServer
    sniffs in asyncio): the first byte, peeked within the socket's timeout, picks TLS (a
    ``TlsStream`` after its handshake) or plain (the socket itself); None for a plain
    connection under enforcing. OSError (TimeoutError, ssl.SSLError) when it fails."""
    first = sock.recv(1, socket.MSG_PEEK)
    if not first:
        raise ConnectionResetError("closed before its first byte")
    if first[0] != TLS_RECORD_HANDSHAKE:
        return None if holder.settings.mode == "enforcing" else sock
    stream = TlsStream(sock, holder.context, server_side=True)
    stream.do_handshake()
    return stream
