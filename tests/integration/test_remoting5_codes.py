"""RocketMQ 5.x's remoting additions against a real `pumice broker` (issue 34, part rem5), in raw
requests: LITE_PULL_MESSAGE (361), GET_TOPIC_CONFIG (351), topic attributes in
UPDATE_AND_CREATE_TOPIC (what ``mqadmin updateTopic -a`` sends), MSG_REGION and TRACE_ON stored
on every send, and each message of a batch keeping its own UNIQ_KEY when the batch has one too
(5.x clients give it one). Every expectation is what RocketMQ 5.3.3's broker answers (its
AdminBrokerProcessor, AttributeUtil, PullMessageProcessor, AbstractSendMessageProcessor); the
Java 5.5.0 client and mqadmin are run against both in tests/interop/test_java5_remoting5.py.
"""

from __future__ import annotations

import orjson

from pumice.client import Message
from pumice.client.message import decode_messages
from pumice.client.message_batch import encode_batch
from pumice.common.message_decoder import record_properties
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode
from pumice.remoting.response_code import ResponseCode
from tests.helpers.clusters import Cluster, call, json_file, pull, req, running_cluster, send

cluster = running_cluster("remoting5")  # one broker for the module

MESSAGE_TYPES = "[UNSPECIFIED, MIXED, TRANSACTION, FIFO, DELAY, NORMAL]"  # Java's HashSet order


def create(topic: str, attributes: str | None = None, queues: int = 4) -> RemotingCommand:
    fields: dict[str, object] = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues,
                                 "writeQueueNums": queues, "perm": 6, "topicFilterType": "SINGLE_TAG",
                                 "topicSysFlag": 0, "order": "false"}  # fmt: skip
    if attributes is not None:
        fields["attributes"] = attributes
    return req(RequestCode.UPDATE_AND_CREATE_TOPIC, **fields)


def lite_pull(topic: str, offset: int, sys_flag: int = 0) -> RemotingCommand:
    """A LITE_PULL_MESSAGE as the 5.x lite pull consumer sends it: PULL_MESSAGE's header, its
    subscription carried (sysFlag 4), the lite flag (16), no commit offset."""
    r = pull(topic, offset, sys_flag=sys_flag | 16)
    r.code = RequestCode.LITE_PULL_MESSAGE
    return r


def test_lite_pull_message_reads_a_queue_as_pull_message_does(cluster: Cluster) -> None:
    topic = "R5Lite"
    sent = call(cluster.br, None, *(send(topic, f"l-{i}".encode(), f"k{i}") for i in range(3)))
    assert [r.code for r in sent] == [ResponseCode.SUCCESS] * 3, [r.remark for r in sent]
    lite, plain, past_end = call(cluster.br, None, lite_pull(topic, 0), pull(topic, 0, sys_flag=0), lite_pull(topic, 3))
    assert (lite.code, lite.remark) == (ResponseCode.SUCCESS, None), lite.remark
    assert [m.body for m in decode_messages(lite.body)] == [b"l-0", b"l-1", b"l-2"]
    assert lite.ext_fields["nextBeginOffset"] == "3" and lite.body == plain.body
    assert past_end.code == ResponseCode.PULL_NOT_FOUND  # no suspend flag: answered at once


def test_get_topic_config_answers_the_topic_with_its_attributes(cluster: Cluster) -> None:
    created, got, missing = call(
        cluster.br, None, create("R5Conf", "+message.type=FIFO", queues=2),
        req(RequestCode.GET_TOPIC_CONFIG, topic="R5Conf"), req(RequestCode.GET_TOPIC_CONFIG, topic="R5Nope"),
    )  # fmt: skip
    assert created.code == ResponseCode.SUCCESS, created.remark
    assert got.code == ResponseCode.SUCCESS, got.remark
    assert orjson.loads(got.body) == {
        "topicName": "R5Conf", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6, "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0, "order": False, "attributes": {"message.type": "FIFO"},
    }  # fmt: skip
    assert (missing.code, missing.remark) == (ResponseCode.TOPIC_NOT_EXIST, "No topic in this broker. topic: R5Nope")


def test_topic_attributes_are_created_updated_and_refused_as_5_3_3_does(cluster: Cluster) -> None:
    topic = "R5Attr"

    def attributes() -> dict[str, str] | None:
        (r,) = call(cluster.br, None, req(RequestCode.GET_ALL_TOPIC_CONFIG))
        tc = orjson.loads(r.body)["topicConfigTable"].get(topic)
        return None if tc is None else tc.get("attributes", {})

    steps = [  # (attributes sent, the answer, the topic's attributes after)
        ("+message.type=FIFO,+reserve.time=3600", (ResponseCode.SUCCESS, None),
         {"message.type": "FIFO", "reserve.time": "3600"}),
        (None, (ResponseCode.SUCCESS, None), {"message.type": "FIFO", "reserve.time": "3600"}),  # kept
        ("+message.type=NORMAL,-reserve.time", (ResponseCode.SUCCESS, None), {"message.type": "NORMAL"}),
        ("+foo=bar", (ResponseCode.SYSTEM_ERROR, "unsupported key: foo"), {"message.type": "NORMAL"}),
        ("+message.type=BAD", (ResponseCode.SYSTEM_ERROR, f"value is not in set: {MESSAGE_TYPES}"),
         {"message.type": "NORMAL"}),
        ("+message.type=MIXED", (ResponseCode.INVALID_PARAMETER, "MIXED message type is not supported."),
         {"message.type": "NORMAL"}),
        ("+queue.type=SimpleCQ",
         (ResponseCode.SYSTEM_ERROR, "attempt to update an unchangeable attribute. key: queue.type"),
         {"message.type": "NORMAL"}),
        ("-cleanup.policy", (ResponseCode.SYSTEM_ERROR, "attempt to delete a nonexistent key: cleanup.policy"),
         {"message.type": "NORMAL"}),
        ("message.type=FIFO", (ResponseCode.SYSTEM_ERROR, "add/alter attribute format is wrong: message.type"),
         {"message.type": "NORMAL"}),
        ("+message.type=TRANSACTION", (ResponseCode.SUCCESS, None), {"message.type": "TRANSACTION"}),
    ]  # fmt: skip
    for sent, answer, after in steps:
        (r,) = call(cluster.br, None, create(topic, sent))
        assert (r.code, r.remark) == answer, sent
        assert attributes() == after, sent
    saved = json_file(cluster.tmp / "store" / "config" / "topics.json")["topicConfigTable"][topic]
    assert saved["attributes"] == {"message.type": "TRANSACTION"}  # as 5.3.3 writes topics.json

    # a creation takes only additions; refused, the topic is not created
    missing = req(RequestCode.GET_TOPIC_CONFIG, topic="R5Attr2")
    r, got = call(cluster.br, None, create("R5Attr2", "-message.type"), missing)
    assert (r.code, r.remark) == (
        ResponseCode.SYSTEM_ERROR, "only add attribute is supported while creating topic. key: message.type"
    )  # fmt: skip
    assert got.code == ResponseCode.TOPIC_NOT_EXIST


def test_every_sent_message_stores_region_and_trace_switch_and_a_batch_keeps_each_id(cluster: Cluster) -> None:
    topic = "R5Props"
    own = ["7F000001000000000000000000000A01", "7F000001000000000000000000000A02"]
    envelope = "7F0000010000000000000000000000EE"
    batch_body = encode_batch(
        [Message(topic, b"b-0"), Message(topic, b"b-1")],
        [{"UNIQ_KEY": own[0], "KEYS": "kb0"}, {"UNIQ_KEY": own[1], "KEYS": "kb1"}],
    )
    batch = req(RequestCode.SEND_BATCH_MESSAGE, batch_body, a="PG", b=topic, c="TBW102", d=4, e=0, f=0, g=1, h=0,
                i=f"UNIQ_KEY\x01{envelope}\x02WAIT\x01true", j=0, m="true")  # fmt: skip
    single, batched = call(cluster.br, None, send(topic, b"s-0", "ks"), batch)
    assert single.code == ResponseCode.SUCCESS and batched.code == ResponseCode.SUCCESS, (single.remark, batched.remark)
    (pulled,) = call(cluster.br, None, pull(topic, 0, sys_flag=0))
    msgs = decode_messages(pulled.body)
    assert [m.body for m in msgs] == [b"s-0", b"b-0", b"b-1"]
    for m in msgs:
        assert (m.properties.get("MSG_REGION"), m.properties.get("TRACE_ON")) == ("DefaultRegion", "true"), m.properties
        assert m.properties["CLUSTER"] == "TestCluster"
    assert [m.msg_id for m in msgs[1:]] == own  # 4.9's encoder appended the batch's UNIQ_KEY: one id for all
    # each stored batch record has one UNIQ_KEY, its own
    stored = _records_properties(pulled.body)[1:]
    assert [p.count("UNIQ_KEY\x01") for p in stored] == [1, 1]
    assert [p for p in stored if envelope in p] == []


def test_a_remoting_send_of_another_message_type_is_stored_as_5_3_3_does(cluster: Cluster) -> None:
    """5.3.3 checks a topic's message type nowhere on the broker's (nor its proxy's) side: the
    v5 gRPC clients do, against the route's accepted types (their ``validate_message_type``
    setting). A remoting send of a plain message to a FIFO topic is stored."""
    created, sent = call(cluster.br, None, create("R5Fifo", "+message.type=FIFO"), send("R5Fifo", b"plain", "kf"))
    assert created.code == ResponseCode.SUCCESS and sent.code == ResponseCode.SUCCESS, (created.remark, sent.remark)


def _records_properties(body: bytes) -> list[str]:
    """The properties string of each record of a pull body, as stored (duplicates kept)."""
    out, pos = [], 0
    while pos < len(body):
        out.append(record_properties(body, pos))
        pos += int.from_bytes(body[pos : pos + 4], "big")
    return out
