"""The ACL holes RocketMQ 4.9 has, closed on a real `pumice broker` with aclEnable=true: a
non-admin account may not send the ACL admin codes (50-53) nor the other state-changing admin
codes, VIEW_MESSAGE_BY_ID needs SUB on the message's topic, SEND_BATCH_MESSAGE and the reply
sends need PUB like SEND_MESSAGE, LOCK/UNLOCK_BATCH_MQ need SUB on the group. Every refusal
changes nothing (the ACL file's bytes, the topic's max offset) and the admin still can."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from pumice.client import Message, MQAdmin
from pumice.client.message_batch import encode_batch
from pumice.common.acl_signer import SessionCredentials
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clusters import Cluster, call, req
from tests.helpers.waiting import ROUTE_NOT_YET, eventually

PLAIN_ACL = """\
accounts:
  - accessKey: adminUser
    secretKey: adminSecret1
    admin: true
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: PUB|SUB
  - accessKey: userOne12
    secretKey: userSecret1
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - AclOpen=PUB|SUB
      - AclSecret=DENY
    groupPerms:
      - LockedGroup=DENY
"""
ADMIN = SessionCredentials("adminUser", "adminSecret1")
USER = SessionCredentials("userOne12", "userSecret1")
TOPICS = ("AclOpen", "AclSecret")


@pytest.fixture(scope="module")
def acl_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("rocketmq-home")
    (home / "conf").mkdir()
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    return home


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, acl_home: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("broker"), f"aclEnable=true\nrocketmqHome={acl_home}\n")
    try:
        with MQAdmin(c.ns, access_key=ADMIN.access_key, secret_key=ADMIN.secret_key) as admin:
            for topic in TOPICS:
                admin.create_topic(topic, cluster="TestCluster", read_queue_nums=1, write_queue_nums=1)
                eventually(lambda t=topic: admin.topic_route(t), 20, f"route of {topic}", retry_on=ROUTE_NOT_YET)
        yield c
    finally:
        c.close()


def send_v2(topic: str, body: bytes, code: int = RequestCode.SEND_MESSAGE_V2) -> RemotingCommand:
    uniq = body.hex().upper().ljust(32, "0")[:32]
    fields = {"a": "AclProducer", "b": topic, "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 1, "h": 0,
              "i": f"TAGS\x01A\x02UNIQ_KEY\x01{uniq}", "j": 0, "k": "false"}  # fmt: skip
    if code == RequestCode.SEND_BATCH_MESSAGE:
        fields["m"] = "true"
        body = encode_batch([Message(topic, body), Message(topic, body + b"2")])
    return req(code, body, **fields)


def max_offset(c: Cluster, topic: str) -> int:
    (r,) = call(c.br, ADMIN, req(RequestCode.GET_MAX_OFFSET, topic=topic, queueId=0))
    assert r.code == ResponseCode.SUCCESS, r.remark
    return int(r.ext_fields["offset"])


def refused(r: RemotingCommand, why: str) -> bool:
    return r.code == ResponseCode.SYSTEM_ERROR and "AclException" in (r.remark or "") and why in (r.remark or "")


# -- the ACL admin codes ---------------------------------------------------------------------------


def test_a_non_admin_cannot_change_the_acl(cluster: Cluster, acl_home: Path) -> None:
    """50 (make itself admin), 53 (open the global white list), 51 (delete the admin) and 52
    from a non-admin account: each refused, the file's bytes unchanged, the admin still served."""
    acl = acl_home / "conf" / "plain_acl.yml"
    before = acl.read_bytes()
    answers = call(
        cluster.br, USER,
        req(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, accessKey=USER.access_key, secretKey=USER.secret_key,
            admin="true", defaultTopicPerm="PUB|SUB"),
        req(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, globalWhiteAddrs="*"),
        req(RequestCode.DELETE_ACL_CONFIG, accessKey=ADMIN.access_key),
        req(RequestCode.GET_BROKER_CLUSTER_ACL_INFO),
    )  # fmt: skip
    for code, r in zip((50, 53, 51, 52), answers, strict=True):
        assert refused(r, f"Need admin permission for request code={code}"), (code, r.code, r.remark)
    assert acl.read_bytes() == before
    # the account is still not admin: an admin code stays refused
    (topic,) = call(cluster.br, USER, req(RequestCode.UPDATE_AND_CREATE_TOPIC, topic="UserMade", readQueueNums=1,
                                          writeQueueNums=1, perm=6, topicFilterType="SINGLE_TAG"))  # fmt: skip
    assert refused(topic, "Need admin permission for request code=17"), topic.remark


def test_the_admin_still_changes_the_acl(cluster: Cluster, acl_home: Path) -> None:
    acl = acl_home / "conf" / "plain_acl.yml"
    before = acl.read_bytes()
    try:
        answers = call(
            cluster.br, ADMIN,
            req(RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, accessKey="tempUser1", secretKey="tempSecret1",
                defaultTopicPerm="SUB"),
            req(RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, globalWhiteAddrs="10.1.2.3"),
            req(RequestCode.GET_BROKER_CLUSTER_ACL_INFO),
        )  # fmt: skip
        assert [r.code for r in answers] == [ResponseCode.SUCCESS] * 3, [r.remark for r in answers]
        text = acl.read_text()
        assert "tempUser1" in text and "10.1.2.3" in text
        (gone,) = call(cluster.br, ADMIN, req(RequestCode.DELETE_ACL_CONFIG, accessKey="tempUser1"))
        assert gone.code == ResponseCode.SUCCESS, gone.remark
        assert "tempUser1" not in acl.read_text()
    finally:
        acl.write_bytes(before)


@pytest.mark.parametrize(
    "code",
    [RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, RequestCode.CLONE_GROUP_OFFSET, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE,
     RequestCode.CLEAN_UNUSED_TOPIC, RequestCode.DELETE_EXPIRED_COMMITLOG, RequestCode.TRIGGER_DELETE_FILES,
     RequestCode.RESUME_CHECK_HALF_MESSAGE, RequestCode.CONSUME_MESSAGE_DIRECTLY, RequestCode.SET_MESSAGE_REQUEST_MODE],
)  # fmt: skip
def test_other_state_changing_admin_codes_need_admin(cluster: Cluster, code: int) -> None:
    """Codes that change offsets, files or other clients (4.9: any signed account)."""
    (r,) = call(cluster.br, USER, req(code, topic="AclOpen", group="SomeGroup", srcGroup="SomeGroup",
                                      destGroup="OtherGroup", timestamp=0, isForce="true"))  # fmt: skip
    assert refused(r, f"Need admin permission for request code={int(code)}"), r.remark


# -- VIEW_MESSAGE_BY_ID --------------------------------------------------------------------------


def test_view_message_by_id_needs_sub_on_its_topic(cluster: Cluster) -> None:
    secret, open_ = call(cluster.br, ADMIN, send_v2("AclSecret", b"secret-body"), send_v2("AclOpen", b"open-body"))
    assert secret.code == open_.code == ResponseCode.SUCCESS, (secret.remark, open_.remark)
    offsets = [int(str(r.ext_fields["msgId"])[16:32], 16) for r in (secret, open_)]
    denied, allowed = call(cluster.br, USER, *(req(RequestCode.VIEW_MESSAGE_BY_ID, offset=o) for o in offsets))
    assert denied.code == ResponseCode.NO_PERMISSION, (denied.code, denied.remark)
    assert "AclSecret" in (denied.remark or "") and not len(denied.body)
    assert allowed.code == ResponseCode.SUCCESS and b"open-body" in bytes(allowed.body)
    (own,) = call(cluster.br, ADMIN, req(RequestCode.VIEW_MESSAGE_BY_ID, offset=offsets[0]))
    assert own.code == ResponseCode.SUCCESS and b"secret-body" in bytes(own.body)


def test_a_lite_pull_needs_what_a_pull_needs(cluster: Cluster) -> None:
    """LITE_PULL_MESSAGE (361, RocketMQ 5.x's lite pull consumer) reads like PULL_MESSAGE: SUB on
    the topic and the group (a signature alone would let any account read any topic)."""
    (sent,) = call(cluster.br, ADMIN, send_v2("AclSecret", b"lite-secret"))
    assert sent.code == ResponseCode.SUCCESS, sent.remark

    def lite(topic: str, group: str) -> RemotingCommand:
        return req(RequestCode.LITE_PULL_MESSAGE, consumerGroup=group, topic=topic, queueId=0, queueOffset=0,
                   maxMsgNums=32, sysFlag=4 | 16, subscription="*", commitOffset=0, subVersion=0)  # fmt: skip

    topic_denied, group_denied = call(cluster.br, USER, lite("AclSecret", "FreeGroup"), lite("AclOpen", "LockedGroup"))
    assert refused(topic_denied, "No default permission for topic:AclSecret"), topic_denied.remark
    assert refused(group_denied, "No default permission for group:LockedGroup"), group_denied.remark
    (own,) = call(cluster.br, ADMIN, lite("AclSecret", "AdminGroup"))
    assert own.code == ResponseCode.SUCCESS and b"lite-secret" in bytes(own.body), own.remark


# -- writes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2])
def test_writes_need_pub(cluster: Cluster, code: int) -> None:
    """Refused without PUB and nothing stored; served with PUB."""
    before = max_offset(cluster, "AclSecret")
    (r,) = call(cluster.br, USER, send_v2("AclSecret", b"batch", code))
    assert refused(r, "No default permission for topic:AclSecret"), (r.code, r.remark)
    assert max_offset(cluster, "AclSecret") == before
    if code == RequestCode.SEND_BATCH_MESSAGE:
        open_before = max_offset(cluster, "AclOpen")
        (ok,) = call(cluster.br, USER, send_v2("AclOpen", b"batch", code))
        assert ok.code == ResponseCode.SUCCESS, ok.remark
        assert max_offset(cluster, "AclOpen") == open_before + 2


def test_reply_v1_needs_pub(cluster: Cluster) -> None:
    before = max_offset(cluster, "AclSecret")
    (r,) = call(cluster.br, USER, req(RequestCode.SEND_REPLY_MESSAGE, b"x", producerGroup="AclProducer",
                                      topic="AclSecret", defaultTopic="TBW102", defaultTopicQueueNums=4, queueId=0,
                                      sysFlag=0, bornTimestamp=1, flag=0, properties=""))  # fmt: skip
    assert refused(r, "No default permission for topic:AclSecret"), (r.code, r.remark)
    assert max_offset(cluster, "AclSecret") == before


@pytest.mark.parametrize("code", [RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ])
def test_queue_locks_need_sub_on_the_group(cluster: Cluster, code: int) -> None:
    def body(group: str) -> bytes:
        return orjson.dumps({"consumerGroup": group, "clientId": "127.0.0.1@x",
                             "mqSet": [{"topic": "AclOpen", "brokerName": "broker-t", "queueId": 0}]})  # fmt: skip

    denied, allowed = call(cluster.br, USER, req(code, body("LockedGroup")), req(code, body("FreeGroup")))
    assert refused(denied, "No default permission for group:LockedGroup"), (denied.code, denied.remark)
    assert allowed.code == ResponseCode.SUCCESS, allowed.remark


def test_pops_and_acks_need_sub_on_the_topic_and_the_group(cluster: Cluster) -> None:
    """RocketMQ 5's POP codes: SUB on the group and on the topic (an ack of a retry message names
    the POP retry topic %RETRY%<group>_<topic>: SUB on the topic it retries)."""

    def pop(topic: str, group: str) -> RemotingCommand:
        return req(RequestCode.POP_MESSAGE, consumerGroup=group, topic=topic, queueId=-1, maxMsgNums=1,
                   invisibleTime=1000, pollTime=0, bornTime=0, initMode=0)  # fmt: skip

    def ack(topic: str, group: str) -> RemotingCommand:
        return req(RequestCode.ACK_MESSAGE, consumerGroup=group, topic=topic, queueId=0, offset=0,
                   extraInfo="0 0 1000 0 0 broker-t 0 0")  # fmt: skip

    answers = call(cluster.br, USER, pop("AclSecret", "FreeGroup"), pop("AclOpen", "LockedGroup"),
                   ack("AclSecret", "FreeGroup"), ack("%RETRY%FreeGroup_AclSecret", "FreeGroup"),
                   pop("AclOpen", "FreeGroup"))  # fmt: skip
    for r, why in zip(answers[:4], ("AclSecret", "LockedGroup", "AclSecret", "AclSecret"), strict=True):
        assert refused(r, why), (why, r.code, r.remark)
    assert answers[4].code in (ResponseCode.SUCCESS, ResponseCode.POLLING_TIMEOUT), answers[4].remark


pytestmark = pytest.mark.timeout(120)


def test_send_back_cannot_copy_a_message_of_a_topic_without_sub(cluster: Cluster) -> None:
    """CONSUMER_SEND_MSG_BACK names a CommitLog offset: without a check of the record's own topic,
    an account could copy any message into its group's retry topic and pull it from there."""
    secret, open_ = call(cluster.br, ADMIN, send_v2("AclSecret", b"secret-2"), send_v2("AclOpen", b"open-2"))
    offsets = [int(str(r.ext_fields["msgId"])[16:32], 16) for r in (secret, open_)]

    def back(offset: int) -> RemotingCommand:
        return req(RequestCode.CONSUMER_SEND_MSG_BACK, offset=offset, group="SneakyGroup", delayLevel=-1,
                   originMsgId="x", originTopic="AclOpen", unitMode="false", maxReconsumeTimes=16)  # fmt: skip

    dlq = "%DLQ%SneakyGroup"  # delayLevel -1: straight to the group's DLQ, at once
    (denied,) = call(cluster.br, USER, back(offsets[0]))
    assert denied.code == ResponseCode.NO_PERMISSION and "AclSecret" in (denied.remark or ""), denied.remark
    (first,) = call(cluster.br, ADMIN, req(RequestCode.GET_MAX_OFFSET, topic=dlq, queueId=0))
    assert first.code != ResponseCode.SUCCESS or int(first.ext_fields["offset"]) == 0, first
    (allowed,) = call(cluster.br, USER, back(offsets[1]))
    assert allowed.code == ResponseCode.SUCCESS, allowed.remark
    assert max_offset(cluster, dlq) == 1


def test_end_transaction_needs_pub_on_the_real_topic(cluster: Cluster) -> None:
    """END_TRANSACTION names a half message by its offsets: an account that may not send to its
    real topic may not commit it there (nor roll it back)."""
    half = send_v2("AclSecret", b"half-body")
    half.ext_fields["f"] = 4  # TRANSACTION_PREPARED_TYPE
    half.ext_fields["i"] += "\x02TRAN_MSG\x01true\x02PGROUP\x01AclProducer"
    (prepared,) = call(cluster.br, ADMIN, half)
    assert prepared.code == ResponseCode.SUCCESS, prepared.remark

    def end() -> RemotingCommand:
        return req(RequestCode.END_TRANSACTION, producerGroup="AclProducer",
                   tranStateTableOffset=prepared.ext_fields["queueOffset"],
                   commitLogOffset=int(str(prepared.ext_fields["msgId"])[16:32], 16), commitOrRollback=8,
                   fromTransactionCheck="false", msgId=prepared.ext_fields["msgId"])  # fmt: skip

    before = max_offset(cluster, "AclSecret")
    (denied,) = call(cluster.br, USER, end())
    assert denied.code == ResponseCode.NO_PERMISSION and "AclSecret" in (denied.remark or ""), denied.remark
    assert max_offset(cluster, "AclSecret") == before
    (committed,) = call(cluster.br, ADMIN, end())
    assert committed.code == ResponseCode.SUCCESS, committed.remark
    assert max_offset(cluster, "AclSecret") == before + 1


@pytest.mark.parametrize("code", [RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2])
def test_a_send_to_a_retry_topic_needs_sub_on_its_group(cluster: Cluster, code: int) -> None:
    """4.9 checks a send to %RETRY%X against the *producer* group (V2's ``a``; V1 names none,
    so nothing is checked): any account could fill another group's retry queue."""
    topic = "%RETRY%LockedGroup"
    if code == RequestCode.SEND_MESSAGE_V2:
        r = send_v2(topic, b"injected")
        r.ext_fields["a"] = "FreeGroup"  # a group the account may SUB
    else:
        r = req(code, b"injected", producerGroup="FreeGroup", topic=topic, defaultTopic="TBW102",
                defaultTopicQueueNums=4, queueId=0, sysFlag=0, bornTimestamp=1, flag=0, properties="")  # fmt: skip
    (denied,) = call(cluster.br, USER, r)
    assert refused(denied, "No default permission for group:LockedGroup"), (denied.code, denied.remark)
    (stored,) = call(cluster.br, ADMIN, req(RequestCode.GET_MAX_OFFSET, topic=topic, queueId=0))
    assert stored.code != ResponseCode.SUCCESS or int(stored.ext_fields["offset"]) == 0, stored
