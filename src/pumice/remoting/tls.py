"""TLS on a RemotingServer's port, as RocketMQ 4.9's ``tls.server.mode``.

==============  ===========================================================================
tlsMode         what a new connection gets
==============  ===========================================================================
disabled        plain (the default here; 4.9's is permissive with a self-signed certificate)
permissive      its first byte decides: 0x16 (a TLS handshake record) TLS, anything else plain;
                with no certificate files, plain only (4.9 would make a test certificate)
enforcing       TLS; a connection whose first byte is not 0x16 is closed
==============  ===========================================================================

Keys (broker.conf and namesrv.conf; 4.9 reads the same from ``-Dtls.server.*`` or
tls.properties): ``tlsServerCertPath`` and ``tlsServerKeyPath`` (PEM; required unless disabled),
``tlsServerTrustCertPath`` (CA file for client certificates; keys with a password are not
taken: the config is listed over the wire by GET_BROKER_CONFIG),
``tlsServerNeedClientAuth`` (``none``, ``optional``, ``require``). A certificate, key or trust
file that changes is loaded for new connections within a second; one that does not load keeps
the previous context (logged). Open connections keep theirs.
"""

from __future__ import annotations

import logging
import os
import ssl
from dataclasses import dataclass
from typing import Any

from pumice.common.file_watch import FileWatchService

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

    @property
    def enabled(self) -> bool:
        """TLS is served: enforcing, or permissive with a certificate (a permissive broker.conf
        with none, as 4.9's samples carry, serves plain only, with a warning)."""
        if self.mode == "permissive":
            return bool(self.cert_path and self.key_path)
        return self.mode == "enforcing"

    def check(self) -> None:
        if self.mode not in MODES:
            raise TlsConfigError(f"tlsMode={self.mode}: expected one of {', '.join(MODES)}")
        if self.need_client_auth not in CLIENT_AUTH:
            raise TlsConfigError(f"tlsServerNeedClientAuth={self.need_client_auth}: expected none, optional or require")
        if self.mode == "enforcing" and (not self.cert_path or not self.key_path):
            raise TlsConfigError(
                f"tlsMode={self.mode} needs tlsServerCertPath and tlsServerKeyPath (PEM files); Pumice makes no "
                "test certificate (4.9's tlsTestModeEnable)"
            )
        if self.need_client_auth != "none" and not self.trust_cert_path:
            raise TlsConfigError(f"tlsServerNeedClientAuth={self.need_client_auth} needs tlsServerTrustCertPath")

    def files(self) -> list[str]:
        return [p for p in (self.cert_path, self.key_path, self.trust_cert_path) if p]

    def server_context(self) -> ssl.SSLContext:
        """A server context from the files; TlsConfigError naming the file that does not load."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        assert self.cert_path and self.key_path
        try:
            ctx.load_cert_chain(self.cert_path, self.key_path)
        except (OSError, ssl.SSLError) as e:
            raise TlsConfigError(f"tlsServerCertPath {self.cert_path} / tlsServerKeyPath {self.key_path}: {e}") from e
        ctx.verify_mode = CLIENT_AUTH[self.need_client_auth]
        if self.trust_cert_path:
            try:
                ctx.load_verify_locations(self.trust_cert_path)
            except (OSError, ssl.SSLError) as e:
                raise TlsConfigError(f"tlsServerTrustCertPath {self.trust_cert_path}: {e}") from e
        return ctx


@dataclass
class TlsServerConfig:
    """The TLS keys of broker.conf and namesrv.conf (a base of BrokerConfig and NamesrvConfig)."""

    tls_mode: str = "disabled"
    tls_server_cert_path: str | None = None
    tls_server_key_path: str | None = None
    tls_server_trust_cert_path: str | None = None
    tls_server_need_client_auth: str = "none"

    def tls_settings(self) -> TlsSettings:
        return TlsSettings(
            mode=self.tls_mode.strip().lower(),
            cert_path=self.tls_server_cert_path or None,
            key_path=self.tls_server_key_path or None,
            trust_cert_path=self.tls_server_trust_cert_path or None,
            need_client_auth=self.tls_server_need_client_auth.strip().lower(),
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
        log.warning("tlsMode=permissive without tlsServerCertPath/tlsServerKeyPath: plain connections only")
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
