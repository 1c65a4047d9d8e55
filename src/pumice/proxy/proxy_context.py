"""One call's context from its gRPC metadata, and its authentication (5.3.3's
``ContextInitPipeline``, ``AuthenticationPipeline`` and ``validateContext``).

The metadata the v5 clients send with every call:

| header            | what                                                                  |
|-------------------|-----------------------------------------------------------------------|
| x-mq-client-id    | the client instance; required (else CLIENT_ID_REQUIRED)               |
| x-mq-language     | JAVA, PYTHON, GOLANG, … (the remoting LanguageCode the broker records) |
| x-mq-client-version | the client's version                                                |
| x-mq-protocol     | GRPC_V2                                                               |
| x-mq-namespace    | the namespace (empty: none)                                           |
| x-mq-date-time    | ``%Y%m%dT%H%M%SZ``: what the signature signs                          |
| x-mq-request-id   | the call's id                                                         |
| authorization     | ``MQv2-HMAC-SHA1 Credential=<ak>, SignedHeaders=x-mq-date-time, Signature=<hex>`` |

With ``aclEnable=true`` the signature is HMAC-SHA1 of the date-time under the account's
secret key (plain_acl.yml, ``pumice.acl``), in hex; a call that fails is answered
UNAUTHORIZED with 5.3.3's message ("username cannot be null.", "User:<ak> is not found.",
"check signature failed.") or the ACL's refusal of the resource.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from pumice.acl.plain_permission_manager import AclDenied, PlainAccessResource, PlainPermissionManager
from pumice.proxy.grpc_status import GrpcProxyError
from pumice.proxy.proto import domain_pb2 as pb

CLIENT_ID = "x-mq-client-id"
LANGUAGE = "x-mq-language"
CLIENT_VERSION = "x-mq-client-version"
NAMESPACE = "x-mq-namespace"
DATE_TIME = "x-mq-date-time"
AUTHORIZATION = "authorization"

# x-mq-language → the remoting LanguageCode name the broker records for the connection
_LANGUAGES = {"JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP", "OMS",
              "RUST", "NODE_JS", "GOLANG", "DOT_NET"}  # fmt: skip


@dataclass
class ProxyContext:
    """What one call says about its client."""

    rpc: str
    client_id: str = ""
    language: str = "OTHER"
    client_version: str = ""
    namespace: str = ""
    remote_addr: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    access_key: str | None = None

    @classmethod
    def of(cls, rpc: str, metadata: Any, peer: str) -> ProxyContext:
        headers = {k.lower(): v for k, v in (metadata or ()) if isinstance(v, str)}
        language = headers.get(LANGUAGE, "").upper() or "OTHER"
        language = {"GOLANG": "GO", "DOT_NET": "DOTNET"}.get(language, language)
        return cls(
            rpc=rpc, client_id=headers.get(CLIENT_ID, "").strip(), language=language if language in _LANGUAGES
            else "OTHER", client_version=headers.get(CLIENT_VERSION, ""), namespace=headers.get(NAMESPACE, ""),
            remote_addr=peer_address(peer), headers=headers,
        )  # fmt: skip

    def require_client_id(self) -> None:
        if not self.client_id:
            raise GrpcProxyError(pb.CLIENT_ID_REQUIRED, "client id cannot be empty")

    @property
    def remote_ip(self) -> str:
        host, _, _ = self.remote_addr.rpartition(":")
        return host.strip("[]") or self.remote_addr


def peer_address(peer: str) -> str:
    """grpc's ``ipv4:127.0.0.1:5000`` / ``ipv6:[::1]:5000`` → ``127.0.0.1:5000`` / ``[::1]:5000``."""
    for prefix in ("ipv4:", "ipv6:"):
        if peer.startswith(prefix):
            return peer[len(prefix) :]
    return peer


def authenticate(ctx: ProxyContext, acl: PlainPermissionManager, request_code: int, resources: dict[str, int]) -> None:
    """The signature and then the perms on ``resources`` (topic → perm, a group as its %RETRY%
    topic), through the broker's ACL rules; GrpcProxyError(UNAUTHORIZED) when refused."""
    authorization = ctx.headers.get(AUTHORIZATION, "")
    access_key: str | None = None
    signature: str | None = None
    if authorization:
        date_time = ctx.headers.get(DATE_TIME, "")
        if not date_time:
            raise GrpcProxyError(pb.UNAUTHORIZED, "datetime is null.")
        parts = authorization.split(" ", 1)
        if len(parts) != 2:
            raise GrpcProxyError(pb.UNAUTHORIZED, "authentication header is incorrect.")
        for item in parts[1].split(","):
            name, sep, value = item.strip().partition("=")
            if not sep:
                raise GrpcProxyError(pb.UNAUTHORIZED, "authentication keyValues length is incorrect, actual length=1.")
            if name == "Credential":
                access_key = value.split("/")[0] or None
            elif name == "Signature":
                try:  # the hex the client sends, as the Base64 the ACL compares
                    signature = base64.b64encode(binascii.unhexlify(value)).decode("ascii")
                except (binascii.Error, ValueError):
                    raise GrpcProxyError(pb.UNAUTHORIZED, "create authentication context error.") from None
        content = (date_time.encode("utf-8"), b"")
    else:
        content = (b"", b"")
    rules = acl.rules
    if not any(match(ctx.remote_ip) for match in rules.global_white):
        if access_key is None:
            raise GrpcProxyError(pb.UNAUTHORIZED, "username cannot be null.")
        if access_key not in rules.accounts:
            raise GrpcProxyError(pb.UNAUTHORIZED, f"User:{access_key} is not found.")
    res = PlainAccessResource(request_code=request_code, remote_ip=ctx.remote_ip, access_key=access_key,
                              signature=signature, content=content, resources=dict(resources))  # fmt: skip
    try:
        acl.validate(res)
    except AclDenied as e:
        message = "check signature failed." if "signature" in str(e) else str(e)
        raise GrpcProxyError(pb.UNAUTHORIZED, message) from None
    ctx.access_key = access_key
