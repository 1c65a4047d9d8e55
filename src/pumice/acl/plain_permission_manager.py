"""The accounts and white lists of RocketMQ 4.9's plain ACL, loaded from its files and checked
against each request.

Files: every ``*.yml`` / ``*.yaml`` under ``$ROCKETMQ_HOME/conf/acl/`` (recursively, by name),
then ``$ROCKETMQ_HOME/conf/plain_acl.yml`` (``rocketmq.acl.plain.file``, relative to the home).
An access key belongs to the first file that names it; the global white lists are merged.

================================  ===========================================================
key                               meaning
================================  ===========================================================
globalWhiteRemoteAddresses        patterns (``remote_address_strategy``) whose clients pass
                                  every check, signed or not
accounts[].accessKey              the account's name (7 characters or more)
accounts[].secretKey              its HMAC key (7 characters or more)
accounts[].whiteRemoteAddress     one pattern: the account's requests from there pass without
                                  signature or permission checks
accounts[].admin                  may send the admin codes (``permission.ADMIN_CODES``);
                                  default false
accounts[].defaultTopicPerm       the perm on a topic not in topicPerms; default DENY
accounts[].defaultGroupPerm       the perm on a group not in groupPerms; default DENY
accounts[].topicPerms             ``topic=PUB|SUB``, ``topic=DENY``, …
accounts[].groupPerms             ``group=SUB``, … (a group's resource is its %RETRY% topic)
dataVersion[0].counter/timestamp  written by the broker's ACL updates
================================  ===========================================================

The files are looked at every 5 s (``watch``): when one is added, removed or modified, every
file is read again and the new rules replace the old at once; a file that does not load keeps
the old rules in force, and the reason is logged.

The ACL admin codes write the files (``update_account``, ``delete_account``,
``update_global_white``): the whole file is rewritten (YAML; comments are not kept, as in
4.9) with its ``dataVersion`` counter moved on, atomically, and the rules are re-read at once.
"""

from __future__ import annotations

import hmac
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from pumice.acl.permission import (
    ADMIN_CODES,
    PUB,
    AclError,
    check_permission,
    check_resource_perms,
    parse_perm,
    split_resource,
)
from pumice.acl.remote_address_strategy import Matcher, remote_address_strategy
from pumice.common.acl_signer import SessionCredentials, cal_signature
from pumice.common.atomic_file import atomic_write
from pumice.common.file_watch import FileWatchService
from pumice.common.java_hash import hash_map_order
from pumice.common.mix_all import RETRY_GROUP_TOPIC_PREFIX, RMQ_SYS_TRACE_TOPIC, get_retry_topic

log = logging.getLogger(__name__)

DEFAULT_ACL_FILE = "conf/plain_acl.yml"
ACL_DIR = "conf/acl"
WATCH_INTERVAL_S = 5.0
MIN_KEY_LENGTH = 7


@dataclass
class PlainAccessResource:
    """What one request asks for: who, from where, signed how, and the perm it needs on each
    topic (a group as its %RETRY% topic), in the order they were added."""

    request_code: int
    remote_ip: str
    access_key: str | None = None
    signature: str | None = None
    content: tuple[bytes, bytes | bytearray | memoryview] = (b"", b"")  # the signed values, the body
    alternative_content: tuple[bytes, bytes | bytearray | memoryview] | None = None  # also accepted
    resources: dict[str, int] = field(default_factory=dict)

    def need(self, resource: str | None, perm: int) -> None:
        if resource is not None:
            self.resources[resource] = perm


@dataclass(frozen=True)
class PlainAccount:
    access_key: str
    secret_key: str
    white: Matcher
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    perms: dict[str, int] | None  # None when neither topicPerms nor groupPerms is given


@dataclass(frozen=True)
class AclRules:
    global_white: tuple[Matcher, ...] = ()
    accounts: dict[str, PlainAccount] = field(default_factory=dict)
    data_versions: dict[str, dict[str, int]] = field(default_factory=dict)  # file → counter, timestamp


class AclDenied(AclError):
    """A request refused; ``where`` is the frame 4.9's remark names (``validate:664``)."""

    def __init__(self, message: str, where: str) -> None:
        super().__init__(message)
        self.where = where

    @property
    def remark(self) -> str:
        # 4.9 answers RemotingHelper.exceptionSimpleDesc(e): the exception and its top frame
        method, _, line = self.where.partition(":")
        cls = "PlainAccessValidator" if method == "parse" else "PlainPermissionManager"
        return (f"org.apache.rocketmq.acl.common.AclException: {self}, "
                f"org.apache.rocketmq.acl.plain.{cls}.{method}({cls}.java:{line})")  # fmt: skip


def _str_list(value: Any, what: str, path: Path) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise AclError(f"{path}: {what} must be a list, got {type(value).__name__}")
    return [str(v) for v in value if v is not None]


def _account(raw: Any, path: Path) -> PlainAccount:
    if not isinstance(raw, dict):
        raise AclError(f"{path}: each entry of accounts must be a mapping, got {raw!r}")
    ak, sk = raw.get("accessKey"), raw.get("secretKey")
    ak = None if ak is None else str(ak)
    sk = None if sk is None else str(sk)
    if ak is None or sk is None or len(ak) < MIN_KEY_LENGTH or len(sk) < MIN_KEY_LENGTH:
        shown = None if sk is None else "*" * len(sk)  # 4.9 prints the secret itself
        raise AclError(f"The accessKey={ak} and secretKey={shown} cannot be null and length should longer than 6")
    white = raw.get("whiteRemoteAddress")
    perms: dict[str, int] | None = None
    for kind, key in (("group", "groupPerms"), ("topic", "topicPerms")):
        for entry in _str_list(raw.get(key), key, path):
            name, perm = split_resource(entry, kind)
            perms = {} if perms is None else perms
            perms[get_retry_topic(name) if kind == "group" else name] = perm
    return PlainAccount(
        access_key=ak,
        secret_key=sk,
        white=remote_address_strategy(None if white is None else str(white)),
        admin=str(raw.get("admin", False)).lower() == "true",
        default_topic_perm=parse_perm(raw.get("defaultTopicPerm")),
        default_group_perm=parse_perm(raw.get("defaultGroupPerm")),
        perms=perms,
    )


def read_acl_file(path: Path) -> dict[str, Any]:
    """One file's mapping ({} when it is empty); AclError when it is not YAML or not a mapping."""
    try:
        text = path.read_text(encoding="utf-8")
        data = yaml.safe_load(text) if text.strip() else {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise AclError(f"{path}: {e}") from e
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise AclError(f"{path}: expected a mapping of globalWhiteRemoteAddresses and accounts")
    return data


def load_rules(files: list[Path]) -> AclRules:
    """The rules of ``files``, in order; AclError naming the file and entry that is not valid."""
    white: list[Matcher] = []
    accounts: dict[str, PlainAccount] = {}
    versions: dict[str, dict[str, int]] = {}
    for path in files:
        data = read_acl_file(path)
        for pattern in _str_list(data.get("globalWhiteRemoteAddresses"), "globalWhiteRemoteAddresses", path):
            try:
                white.append(remote_address_strategy(pattern))
            except AclError as e:
                raise AclError(f"{path}: globalWhiteRemoteAddresses: {e}") from None
        seen: set[str] = set()
        for raw in data.get("accounts") or []:
            try:
                account = _account(raw, path)
            except AclError as e:
                raise AclError(f"{path}: {e}") from None
            if account.access_key in accounts and account.access_key not in seen:
                log.warning("access key %s is in several ACL files: %s's is ignored", account.access_key, path)
                continue
            seen.add(account.access_key)
            accounts[account.access_key] = account
        versions[str(path)] = _data_version(data)
    return AclRules(tuple(white), accounts, versions)


def _data_version(data: dict[str, Any]) -> dict[str, int]:
    """A file's ``dataVersion: [{counter, timestamp}]`` (counter 0, timestamp now when absent)."""
    dv = data.get("dataVersion")
    first = dv[0] if isinstance(dv, list) and dv and isinstance(dv[0], dict) else {}
    return {
        "counter": int(first.get("counter", 0) or 0),
        "timestamp": int(first.get("timestamp", 0) or int(time.time() * 1000)),
    }


def acl_files(default_file: Path, acl_dir: Path) -> list[Path]:
    """The ACL files, in the order they are read: ``acl_dir``'s by name, then the default file."""
    found = sorted(p for p in acl_dir.rglob("*") if p.suffix in (".yml", ".yaml") and p.is_file()) \
        if acl_dir.is_dir() else []  # fmt: skip
    if default_file.is_file() and default_file not in found:
        found.append(default_file)
    return found


def account_credentials(home: str | os.PathLike[str], access_key: str) -> SessionCredentials:
    """The keys of the account ``access_key`` of the ACL files under ``home`` (a broker signing
    its name-server requests); AclError when the files do not load or do not define it."""
    root = Path(home)
    files = acl_files(Path(os.path.normpath(root / DEFAULT_ACL_FILE)), Path(os.path.normpath(root / ACL_DIR)))
    account = load_rules(files).accounts.get(access_key)
    if account is None:
        raise AclError(f"no account {access_key} in {root / DEFAULT_ACL_FILE} or {root / ACL_DIR}/*.yml")
    return SessionCredentials(account.access_key, account.secret_key)


def signing_credentials(home: str | None, key_name: str, access_key: str, conf_file: str) -> SessionCredentials:
    """The keys a server signs its own requests with (``key_name``, e.g. namesrvAccessKey, names
    the account): the secret key read from the ACL files under ``home``, never from ``conf_file``
    (its config is handed out by GET_*_CONFIG). RuntimeError, for the start to stop, naming why."""
    if not home:
        raise RuntimeError(
            f"{key_name}={access_key} needs ROCKETMQ_HOME (or rocketmqHome in {conf_file}): its secret key "
            "is read from $ROCKETMQ_HOME/conf/plain_acl.yml or conf/acl/*.yml"
        )
    try:
        return account_credentials(home, access_key)
    except AclError as e:
        raise RuntimeError(f"{key_name}={access_key}: {e}") from e


def start_manager(home: str | None, conf_file: str) -> PlainPermissionManager:
    """aclEnable=true at a server's start: the manager of the ACL files under ``home``, or
    RuntimeError, for the start to stop, naming why (no home, files that do not load)."""
    if not home:
        raise RuntimeError(
            f"aclEnable=true needs ROCKETMQ_HOME (or rocketmqHome in {conf_file}): the rules are read from "
            "$ROCKETMQ_HOME/conf/plain_acl.yml and $ROCKETMQ_HOME/conf/acl/*.yml"
        )
    try:
        return PlainPermissionManager(home)
    except (AclError, OSError) as e:
        raise RuntimeError(f"aclEnable=true: the ACL files under {home}/conf do not load: {e}") from e


class PlainPermissionManager:
    """The rules in force and the files they come from; ``validate`` checks one request."""

    def __init__(self, home: str | os.PathLike[str], acl_file: str = DEFAULT_ACL_FILE) -> None:
        self.home = Path(home)
        self.default_file = Path(os.path.normpath(self.home / acl_file))
        self.acl_dir = Path(os.path.normpath(self.home / ACL_DIR))
        self._stamps: dict[Path, float] = {}
        self._lock = threading.Lock()  # the watcher and the admin codes both load and write
        self._watcher: FileWatchService | None = None
        self.default_file.parent.mkdir(parents=True, exist_ok=True)
        if not self.default_file.exists():
            self.default_file.touch()  # as 4.9: an empty file to write accounts into
        self.rules = self._load()

    # -- files ------------------------------------------------------------------------------

    def files(self) -> list[Path]:
        return acl_files(self.default_file, self.acl_dir)

    def _load(self) -> AclRules:
        files = self.files()
        stamps = {p: p.stat().st_mtime for p in files}
        rules = load_rules(files)
        self._stamps = stamps
        return rules

    def reload_if_changed(self) -> bool:
        """Reads the files again when one was added, removed or modified. A file that does not
        load leaves the rules as they were (logged; tried again when it changes)."""
        try:
            files = self.files()
            stamps = {p: p.stat().st_mtime for p in files}
        except OSError as e:
            log.warning("ACL files not readable: %s", e)
            return False
        if stamps == self._stamps:
            return False
        with self._lock:
            self._stamps = stamps
            try:
                self.rules = load_rules(files)
            except AclError as e:
                log.error("ACL files not reloaded, the previous rules stay in force: %s", e)
                return False
        log.info("ACL reloaded: %d accounts, %d global white patterns from %d files",
                 len(self.rules.accounts), len(self.rules.global_white), len(files))  # fmt: skip
        return True

    # -- the admin codes' writes -------------------------------------------------------------

    def _write(self, path: Path, data: dict[str, Any]) -> None:
        """``data`` as ``path``'s YAML with its dataVersion moved on; then the rules re-read (a
        file set that would not load is not written)."""
        data["dataVersion"] = [{"counter": _data_version(data)["counter"] + 1, "timestamp": int(time.time() * 1000)}]
        text = yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)
        files = self.files()
        previous = path.read_bytes() if path.exists() else None
        atomic_write(path, text.encode("utf-8"), keep_backup=False)
        try:
            rules = load_rules(files if path in files else [*files, path])
        except AclError:
            if previous is None:
                path.unlink()
            else:
                atomic_write(path, previous, keep_backup=False)
            raise
        self.rules = rules
        self._stamps = {p: p.stat().st_mtime for p in self.files()}

    def _file_of(self, access_key: str) -> tuple[Path, dict[str, Any], int] | None:
        """The file that defines ``access_key``, its data and the account's index there."""
        for path in self.files():
            data = read_acl_file(path)
            for i, raw in enumerate(data.get("accounts") or []):
                if isinstance(raw, dict) and str(raw.get("accessKey")) == access_key:
                    return path, data, i
        return None

    def update_account(self, account: dict[str, Any]) -> None:
        """UPDATE_AND_CREATE_ACL_CONFIG: the account replaced where it is defined, or added to
        the default file. Fields not given keep their value, but ``admin`` is always written."""
        with self._lock:
            _account(account, self.default_file)  # the key lengths and the white-list pattern
            check_resource_perms(list(account.get("topicPerms") or []))
            check_resource_perms(list(account.get("groupPerms") or []))
            found = self._file_of(str(account["accessKey"]))
            if found is None:
                path, data = self.default_file, read_acl_file(self.default_file)
                data["accounts"] = [*(data.get("accounts") or []), {k: v for k, v in account.items() if v is not None}]
            else:
                path, data, i = found
                merged = dict(data["accounts"][i])
                merged.update({k: v for k, v in account.items() if v is not None})
                data["accounts"][i] = merged
            self._write(path, data)

    def delete_account(self, access_key: str) -> bool:
        """DELETE_ACL_CONFIG: False when no file defines the account."""
        with self._lock:
            found = self._file_of(access_key)
            if found is None:
                return False
            path, data, i = found
            del data["accounts"][i]
            self._write(path, data)
            return True

    def update_global_white(self, patterns: list[str], file: str | None) -> None:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: a file's globalWhiteRemoteAddresses replaced."""
        with self._lock:
            path = self.default_file if not file else Path(os.path.normpath(file))
            inside = path == self.default_file or self.acl_dir in path.parents
            if not inside or path.suffix not in (".yml", ".yaml") or not path.is_file():
                where = f"{self.default_file} or {self.acl_dir}/*.yml"
                raise AclError(f"{path} is not an ACL file of this broker ({where})")
            for pattern in patterns:
                remote_address_strategy(pattern)
            data = read_acl_file(path)
            data["globalWhiteRemoteAddresses"] = list(patterns)
            self._write(path, data)

    def data_versions(self) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
        """The default file's dataVersion, and every file's, by path."""
        versions = self.rules.data_versions
        default = versions.get(str(self.default_file), {"counter": 0, "timestamp": int(time.time() * 1000)})
        return default, dict(versions)

    def start_watching(self, interval_s: float = WATCH_INTERVAL_S) -> None:
        self._watcher = FileWatchService(self.reload_if_changed, interval_s, "AclFileWatchService")
        self._watcher.start()

    def shutdown(self) -> None:
        if self._watcher is not None:
            self._watcher.shutdown()

    # -- checks ----------------------------------------------------------------------------

    def validate(self, res: PlainAccessResource, check_signature: bool = True) -> None:
        """Raises AclDenied with 4.9's message when the request may not go on. Without
        ``check_signature``: a second check of a request whose signature was checked already
        (a resource known only after reading, as VIEW_MESSAGE_BY_ID's topic)."""
        rules = self.rules  # one snapshot: a reload swaps the whole object
        if any(match(res.remote_ip) for match in rules.global_white):
            return
        if res.access_key is None:
            raise AclDenied("No accessKey is configured", "validate:664")
        account = rules.accounts.get(res.access_key)
        if account is None:
            raise AclDenied(f"No acl config for {res.access_key}", "validate:668")
        if account.white(res.remote_ip):
            return
        if check_signature and not self._signed(res, account.secret_key):
            raise AclDenied(f"Check signature failed for accessKey={res.access_key}", "validate:684")
        if res.resources.get(RMQ_SYS_TRACE_TOPIC) == PUB:  # PUB to the trace topic: always allowed
            return
        self._check_perm(res, account)

    @staticmethod
    def _signed(res: PlainAccessResource, secret_key: str) -> bool:
        if res.signature is None:
            return False
        given = res.signature.encode("utf-8", "replace")  # bytes: compare_digest takes any
        # compare_digest: the time taken says nothing about how much of a forged signature is right
        if hmac.compare_digest(cal_signature(res.content, secret_key).encode(), given):
            return True
        alternative = res.alternative_content
        return alternative is not None and hmac.compare_digest(cal_signature(alternative, secret_key).encode(), given)

    @staticmethod
    def _check_perm(res: PlainAccessResource, account: PlainAccount) -> None:
        if res.request_code in ADMIN_CODES and not account.admin:
            raise AclDenied(
                f"Need admin permission for request code={res.request_code}, but accessKey={account.access_key} is not",
                "checkPerm:581",
            )
        if not res.resources or (account.perms is None and account.admin):
            return
        for resource in hash_map_order(list(res.resources)):  # 4.9 reports the first in HashMap order
            needed = res.resources[resource]
            is_group = resource.startswith(RETRY_GROUP_TOPIC_PREFIX)
            shown = f"group:{resource[len(RETRY_GROUP_TOPIC_PREFIX) :]}" if is_group else f"topic:{resource}"
            if account.perms is None or resource not in account.perms:
                owned = account.default_group_perm if is_group else account.default_topic_perm
                if not check_permission(needed, owned):
                    raise AclDenied(f"No default permission for {shown}", "checkPerm:606")
            elif not check_permission(needed, account.perms[resource]):
                raise AclDenied(f"No default permission for {shown}", "checkPerm:611")
