"""RocketMQ 4.9's plain ACL in pumice.acl and pumice.common.acl_signer.

The signatures, remarks and address results were computed by RocketMQ 4.9.8's own classes
(rocketmq-acl 4.9.8 on Java 17: AclClientRPCHook, AclUtils, PlainPermissionManager,
RemoteAddressStrategyFactory), not by this code."""

from __future__ import annotations

import os
import time
from pathlib import Path

import orjson
import pytest

from pumice.acl.permission import ANY, DENY, PUB, SUB, AclError, check_permission, parse_perm
from pumice.acl.plain_access_validator import PlainAccessValidator, parse
from pumice.acl.plain_permission_manager import PlainPermissionManager
from pumice.acl.remote_address_strategy import remote_address_strategy
from pumice.common.acl_signer import SessionCredentials, cal_signature, request_content
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_exceptions import RequestRefused
from pumice.remoting.request_code import RequestCode

# -- the signature ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "signature"),
    [
        (b"RocketMQ", "IUc8rrO/0gDch8CjObLQsW2rsiA="),
        (b"RocketMQGroupATopicA", "F9iWeT0wmt95aPla1BSeDtOD0Aw="),
        (b"rocketmq2TopicTestHello", "jkePOgElowBMDelNnopEdBDLBKs="),
        ("RocketMQé中".encode(), "j1/VUoFki5QR9444sQt6xYqzLkc="),
    ],
)
def test_hmac_sha1_base64_as_java(data: bytes, signature: str) -> None:
    assert cal_signature(data, "12345678") == signature


def test_a_request_without_header_signs_its_access_key_only() -> None:
    ext: dict[str, object] = {}
    SessionCredentials("RocketMQ", "12345678").sign(ext, b"")
    assert ext == {"AccessKey": "RocketMQ", "Signature": "IUc8rrO/0gDch8CjObLQsW2rsiA="}


def test_send_message_v2_signed_as_aclclientrpchook() -> None:
    # createSendMessageRequestHeaderV2's fields (maxReconsumeTimes and bname null: not sent)
    ext = {"a": "PG", "b": "topicB", "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 1700000000000, "h": 0,
           "i": "UNIQ_KEY\x01ABC\x02", "j": 0, "k": False, "m": False, "l": None}  # fmt: skip
    SessionCredentials("RocketMQ", "12345678").sign(ext, b"Hello")
    assert ext["Signature"] == "pTKSgpiBRBTScwm74WE1138QOmo="
    assert ext["k"] == "false" and ext["d"] == "4" and "l" not in ext  # sent as signed


def test_pull_signed_with_a_security_token() -> None:
    ext = {"consumerGroup": "groupZ", "topic": "topicC", "queueId": 0, "queueOffset": 0, "maxMsgNums": 32,
           "sysFlag": 0, "commitOffset": 0, "suspendTimeoutMillis": 1000, "subVersion": 1}  # fmt: skip
    SessionCredentials("RocketMQ", "12345678", "tok123").sign(ext, None)
    assert request_content(ext, None) == b"RocketMQtok1230groupZ3200110000topicC"
    assert ext["Signature"] == "aogw2RqkorB0zUoanyeg89AsBC8="


def test_credentials_are_never_printed() -> None:
    assert "12345678" not in repr(SessionCredentials("RocketMQ", "12345678"))


# -- permissions and addresses ---------------------------------------------------------------


def test_permissions() -> None:
    assert [parse_perm(t) for t in ("PUB", " SUB ", "PUB|SUB", "SUB|PUB", "DENY", "pub", "PUB | SUB", None)] == [
        PUB, SUB, PUB | SUB, PUB | SUB, DENY, DENY, DENY, DENY,
    ]  # fmt: skip
    assert check_permission(PUB, PUB | SUB) and not check_permission(SUB, PUB)
    assert not check_permission(PUB, PUB | DENY) and check_permission(ANY, SUB)


ADMITS = [
    ("192.168.1.1", "192.168.1.1", True), ("192.168.1.1", "192.168.1.2", False),
    ("192.168.1.*", "192.168.1.77", True), ("192.168.1.*", "192.168.10.7", False),
    ("192.168.1.1-20", "192.168.1.20", True), ("192.168.1.1-20", "192.168.1.21", False),
    ("192.168.1.{1,2,3}", "192.168.1.2", True), ("192.168.1.{1,2,3}", "192.168.1.4", False),
    ("192.168.1.1,192.168.1.2", "192.168.1.2", True), ("192.168.*.*", "192.168.9.9", True),
    ("::1", "0:0:0:0:0:0:0:1", True), ("1050::0005:0600:300c:326b", "1050:0:0:0:5:600:300c:326b", True),
    ("1050::0005:0600:300c:1-ff", "1050::5:600:300c:fe", True),
    ("1050::0005:0600:300c:1-ff", "1050::5:600:300c:1ff", False),
    ("1050::0005:0600:300c:{1,2}", "1050::5:600:300c:2", True), ("*", "10.1.2.3", True), ("", "10.1.2.3", False),
]  # fmt: skip


@pytest.mark.parametrize(("pattern", "ip", "admitted"), ADMITS)
def test_white_list_patterns(pattern: str, ip: str, admitted: bool) -> None:
    assert remote_address_strategy(pattern)(ip) is admitted


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("192.168.001.1", "Netaddress examine Exception netaddress is 192.168.001.1"),
        ("localhost", "Netaddress examine Exception netaddress is localhost"),
        ("192.168.*", "Netaddress examine scope Exception netaddress is 192.168.*"),
        ("300.168.1.*", "Netaddress examine scope Exception netaddress is 300.168.1.*"),
        ("192.168.1.20-1", "RangeRemoteAddressStrategy netaddress examine scope Exception start is 20 , end is 1"),
        ("192.168.1.-1", "RangeRemoteAddressStrategy netaddress examine scope Exception value -1 "),
        ("192.168.1.{1,300}", "Netaddress examine Exception netaddress is 192.168.1.300"),
        ("192.168.1.1,10.0.0.*", "Netaddress examine Exception netaddress is 10.0.0.*"),
        ("1050::0005:0600:*:300c", "Netaddress examine scope Exception netaddress is 1050::0005:0600:*:300c"),
        # 4.9 loads these and then fails every request checked against them (or ignores ".7")
        ("*.168.1.1", "Netaddress examine scope Exception netaddress is *.168.1.1"),
        ("192.168.1-5.7", "Netaddress examine scope Exception netaddress is 192.168.1-5.7"),
    ],
)
def test_white_list_patterns_refused(pattern: str, message: str) -> None:
    with pytest.raises(AclError) as e:
        remote_address_strategy(pattern)
    assert str(e.value) == message


# -- the validator ----------------------------------------------------------------------------

PLAIN_ACL = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    return tmp_path


def request(
    code: int, ext: dict[str, object], body: bytes = b"", signer: SessionCredentials | None = None
) -> RemotingCommand:
    cmd = RemotingCommand(code=code, ext_fields=dict(ext), body=body)
    if signer is not None:
        signer.sign_request(cmd)
    return cmd


ROCKETMQ = SessionCredentials("RocketMQ", "12345678")
PREFIX = "org.apache.rocketmq.acl.common.AclException: "
MANAGER = "org.apache.rocketmq.acl.plain.PlainPermissionManager"


def refusal(validator: PlainAccessValidator, cmd: RemotingCommand, addr: str = "127.0.0.1:50000") -> str | None:
    try:
        validator.check(addr, cmd)
    except RequestRefused as e:
        return e.remark
    return None


def test_remarks_as_49(home: Path) -> None:
    v = PlainAccessValidator(PlainPermissionManager(home))
    send = {"a": "PG", "b": "topicB", "c": "TBW102", "d": 4, "e": 0}
    assert refusal(v, request(310, send)) == (
        f"{PREFIX}No accessKey is configured, {MANAGER}.validate(PlainPermissionManager.java:664)"
    )
    assert refusal(v, request(310, send, signer=SessionCredentials("nobody99", "12345678"))) == (
        f"{PREFIX}No acl config for nobody99, {MANAGER}.validate(PlainPermissionManager.java:668)"
    )
    assert refusal(v, request(310, send, signer=SessionCredentials("RocketMQ", "wrong-secret"))) == (
        f"{PREFIX}Check signature failed for accessKey=RocketMQ, {MANAGER}.validate(PlainPermissionManager.java:684)"
    )
    assert refusal(v, request(310, send, signer=ROCKETMQ)) is None  # topicB=PUB|SUB
    assert refusal(v, request(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "x"}, signer=ROCKETMQ)) == (
        f"{PREFIX}Need admin permission for request code=17, but accessKey=RocketMQ is not, "
        f"{MANAGER}.checkPerm(PlainPermissionManager.java:581)"
    )
    # an absent topic: the default perm (DENY), line 606; an explicit DENY: line 611
    assert refusal(v, request(310, {**send, "b": "topicZ"}, signer=ROCKETMQ)) == (
        f"{PREFIX}No default permission for topic:topicZ, {MANAGER}.checkPerm(PlainPermissionManager.java:606)"
    )
    assert refusal(v, request(310, {**send, "b": "topicC"}, signer=ROCKETMQ)).endswith(  # type: ignore[union-attr]
        f"No default permission for topic:topicC, {MANAGER}.checkPerm(PlainPermissionManager.java:611)"
    )
    # a signature that is not even Base64 (or ASCII) is refused, not a crash
    odd = request(310, send, signer=ROCKETMQ)
    odd.ext_fields["Signature"] = "sïgnature\udcff"
    assert "Check signature failed" in (refusal(v, odd) or "")
    # the body is signed too: a changed body fails the signature
    tampered = request(310, send, b"hello", signer=ROCKETMQ)
    tampered.body = b"HELLO"
    assert "Check signature failed" in (refusal(v, tampered) or "")


def test_two_failures_report_the_first_in_java_hashmap_order(home: Path) -> None:
    v = PlainAccessValidator(PlainPermissionManager(home))
    pull = {"consumerGroup": "groupA", "topic": "topicA", "queueId": 0, "queueOffset": 0, "maxMsgNums": 32}
    assert "No default permission for topic:topicA" in (refusal(v, request(11, pull, signer=ROCKETMQ)) or "")
    assert "No default permission for group:groupA" in (
        refusal(v, request(11, {**pull, "topic": "topicZ"}, signer=ROCKETMQ)) or ""
    )


def test_white_lists_pass_without_a_signature(home: Path) -> None:
    v = PlainAccessValidator(PlainPermissionManager(home))
    create = {"topic": "topicNew"}
    assert refusal(v, request(17, create), "10.10.103.7:4000") is None  # global white list, unsigned
    unsigned_admin = request(17, {**create, "AccessKey": "rocketmq2"})
    assert refusal(v, unsigned_admin, "192.168.1.9:4000") is None  # the account's white list
    assert "Check signature failed" in (refusal(v, unsigned_admin, "192.168.2.9:4000") or "")


def test_heartbeat_needs_each_group_and_topic(home: Path) -> None:
    v = PlainAccessValidator(PlainPermissionManager(home))
    body = orjson.dumps({"clientID": "c", "producerDataSet": [], "consumerDataSet": [
        {"groupName": "groupB", "subscriptionDataSet": [{"topic": "topicC"}, {"topic": "topicB"}]}]})  # fmt: skip
    assert refusal(v, request(34, {}, body, signer=ROCKETMQ)) is None
    body2 = body.replace(b"topicB", b"topicZ")
    assert "topic:topicZ" in (refusal(v, request(34, {}, body2, signer=ROCKETMQ)) or "")
    res = parse(request(34, {}, body2, signer=ROCKETMQ), "127.0.0.1")
    assert res.resources == {"%RETRY%groupB": SUB, "topicC": SUB, "topicZ": SUB}


def test_a_query_signed_with_unique_key_query_is_accepted(home: Path) -> None:
    # the Java client signs _UNIQUE_KEY_QUERY; 4.9's broker leaves it out and refuses every such query
    v = PlainAccessValidator(PlainPermissionManager(home))
    query = {"topic": "topicC", "key": "k", "maxNum": 32, "beginTimestamp": 0, "endTimestamp": 1,
             "_UNIQUE_KEY_QUERY": "false"}  # fmt: skip
    assert refusal(v, request(12, query, signer=ROCKETMQ)) is None


def test_files_reload_and_a_bad_file_keeps_the_rules(home: Path) -> None:
    manager = PlainPermissionManager(home)
    v = PlainAccessValidator(manager)
    newcomer = SessionCredentials("newUser1", "newSecret1")
    send = {"a": "PG", "b": "topicN", "c": "TBW102", "d": 4, "e": 0}
    assert "No acl config for newUser1" in (refusal(v, request(310, send, signer=newcomer)) or "")
    acl = home / "conf" / "plain_acl.yml"
    acl.write_text(PLAIN_ACL + "  - accessKey: newUser1\n    secretKey: newSecret1\n    defaultTopicPerm: PUB\n")
    os.utime(acl, (time.time() + 2, time.time() + 2))
    assert manager.reload_if_changed()
    assert refusal(v, request(310, send, signer=newcomer)) is None
    # a file that does not load: the rules stay, and so does the account
    acl.write_text("accounts: [\n")
    os.utime(acl, (time.time() + 4, time.time() + 4))
    assert not manager.reload_if_changed()
    assert refusal(v, request(310, send, signer=newcomer)) is None
    # a file in conf/acl/ adds accounts; an emptied file leaves none (4.9 would keep the old ones)
    (home / "conf" / "acl").mkdir()
    (home / "conf" / "acl" / "team.yml").write_text("accounts:\n  - accessKey: teamUser1\n    secretKey: teamSecret1\n")
    acl.write_text("")
    os.utime(acl, (time.time() + 6, time.time() + 6))
    assert manager.reload_if_changed()
    assert set(manager.rules.accounts) == {"teamUser1"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("accounts:\n  - accessKey: short\n    secretKey: 12345678\n",
         "The accessKey=short and secretKey=******** cannot be null and length should longer than 6"),
        ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    topicPerms: [topicA]\n",
         "Parse resource permission failed for topic:topicA"),
        ("globalWhiteRemoteAddresses: ['*.168.1.1']\n", "Netaddress examine scope Exception netaddress is *.168.1.1"),
        ("- a list\n", "expected a mapping"),
    ],
)  # fmt: skip
def test_a_bad_file_stops_start_up_with_its_reason(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "plain_acl.yml").write_text(text)
    with pytest.raises(AclError) as e:
        PlainPermissionManager(tmp_path)
    assert message in str(e.value) and "plain_acl.yml" in str(e.value)


def test_a_missing_file_is_created_empty(tmp_path: Path) -> None:
    manager = PlainPermissionManager(tmp_path)
    assert (tmp_path / "conf" / "plain_acl.yml").read_text() == ""
    assert manager.rules.accounts == {}


def test_keys_given_with_a_client_instance_are_refused_by_name() -> None:
    from pumice.client import AsyncProducer, MQClientError
    from pumice.client.client_instance import MQClientInstance

    instance = MQClientInstance("127.0.0.1:9876")
    with pytest.raises(MQClientError, match="access_key, secret_key and use_tls are the client_instance's"):
        AsyncProducer("PG", client_instance=instance, access_key="RocketMQ", secret_key="12345678")
    assert AsyncProducer("PG", client_instance=instance).instance is instance
    assert AsyncProducer("PG", access_key="RocketMQ", secret_key="12345678").instance.api.remoting.rpc_hook is not None
