"""The timer put hook (pumice.broker.timer_message_hook.TimerMessageHook) on a real
DefaultMessageStore: which puts it routes (5.3.3's handleScheduleMessage runs on every put), the
batch's routing by its own properties, and that a refusal stores nothing; and RECALL_MESSAGE's
ACL rule."""

from __future__ import annotations

import time

from pumice.acl.plain_access_validator import PlainAccessValidator
from pumice.acl.plain_permission_manager import PlainPermissionManager
from pumice.broker.timer_message_hook import TimerMessageHook, batch_timer_property
from pumice.client import Message
from pumice.client.message_batch import encode_batch
from pumice.common.acl_signer import SessionCredentials
from pumice.common.message import MessageExtBatch, MessageExtBrokerInner
from pumice.common.message_decoder import string_to_message_properties
from pumice.common.message_sys_flag import MessageSysFlag
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.remoting_exceptions import RequestRefused
from pumice.remoting.request_code import RequestCode
from pumice.store import DefaultMessageStore
from pumice.store.put_message_result import PutMessageStatus
from pumice.store.timer.timer_message_store import TIMER_TOPIC
from tests.helpers.store import small_config


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def message(props: dict[str, str], topic: str = "Real", sys_flag: int = 0) -> MessageExtBrokerInner:
    return MessageExtBrokerInner(topic=topic, body=b"x", queue_id=1, properties=dict(props), sys_flag=sys_flag)


def hook(tmp_path, **kw: object) -> TimerMessageHook:
    cfg = small_config(str(tmp_path), timer_precision_ms=100, timer_max_delay_sec=60, **kw)
    cfg.validate()
    return TimerMessageHook(cfg, None)


def test_the_hook_routes_plain_and_committed_messages_not_halves(tmp_path) -> None:
    h = hook(tmp_path)
    later = {"TIMER_DELAY_MS": "5000"}
    for sys_flag in (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE):
        m = message(later, sys_flag=sys_flag)
        assert h(m) is None and (m.topic, m.queue_id) == (TIMER_TOPIC, 0), sys_flag
        assert (m.properties["REAL_TOPIC"], m.properties["REAL_QID"]) == ("Real", "1")
    for sys_flag in (MessageSysFlag.TRANSACTION_PREPARED_TYPE, MessageSysFlag.TRANSACTION_ROLLBACK_TYPE):
        m = message(later, sys_flag=sys_flag)
        assert h(m) is None and m.topic == "Real", sys_flag
    half = message({**later, "REAL_TOPIC": "Real"}, topic="RMQ_SYS_TRANS_HALF_TOPIC")  # type NOT, as stored
    assert h(half) is None and half.topic == "RMQ_SYS_TRANS_HALF_TOPIC" and half.properties["REAL_TOPIC"] == "Real"


def test_a_send_back_copy_keeps_its_level_and_a_dlq_copy_is_routed(tmp_path) -> None:
    h = hook(tmp_path)
    retry = message({"DELAY": "3", "TIMER_DELIVER_MS": str(now_ms() + 5000), "TIMER_OUT_MS": "1"}, "%RETRY%G")
    assert h(retry) is None and retry.topic == "%RETRY%G"
    assert "TIMER_DELIVER_MS" not in retry.properties and retry.properties_string is not None
    assert "TIMER_DELIVER_MS" not in retry.properties_string
    dlq = message({"TIMER_DELAY_SEC": "2"}, "%DLQ%G")  # no level: 5.3.3 routes it again
    assert h(dlq) is None and dlq.topic == TIMER_TOPIC and dlq.properties["REAL_TOPIC"] == "%DLQ%G"
    delivered = message({"TIMER_DELAY_SEC": "2", "TIMER_OUT_MS": "1"}, "%DLQ%G")  # routed once already
    assert h(delivered) is None and delivered.topic == "%DLQ%G"


def batch(props: list[dict[str, str]], suffix: str) -> MessageExtBatch:
    body = encode_batch([Message("Real", b"b-%d" % i) for i in range(len(props))], props)
    return MessageExtBatch(topic="Real", queue_id=2, body=body, properties_suffix=suffix)


def test_a_batch_goes_by_its_own_properties(tmp_path) -> None:
    h = hook(tmp_path)
    b = batch([{}, {}], "WAIT\x01true\x02TIMER_DELAY_MS\x013000\x02CLUSTER\x01C")
    assert h(b) is None and (b.topic, b.queue_id) == (TIMER_TOPIC, 0)
    suffix = string_to_message_properties(b.properties_suffix)
    assert (suffix["REAL_TOPIC"], suffix["REAL_QID"], suffix["CLUSTER"]) == ("Real", "2", "C")
    assert int(suffix["TIMER_OUT_MS"]) % 100 == 0
    inner = batch([{}, {"KEYS": "k"}, {"TIMER_DELIVER_MS": "1"}], "WAIT\x01true")
    assert batch_timer_property(inner.body) == (2, "TIMER_DELIVER_MS")
    refused = h(inner)
    assert refused is not None and refused.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert "message 2 of the batch has the timer property TIMER_DELIVER_MS" in refused.remark
    both = batch([{"TIMER_DELAY_MS": "9"}], "TIMER_DELAY_MS\x012000")  # the batch's time wins, as stored
    assert h(both) is None and both.topic == TIMER_TOPIC
    plain = batch([{"KEYS": "TIMER_DELAY_MS"}], "")  # a value, not a name
    assert h(plain) is None and plain.topic == "Real"


def test_refusals_store_nothing(tmp_path) -> None:
    store = DefaultMessageStore(small_config(str(tmp_path), timer_wheel_enable=False))
    assert store.load()
    store.start()
    try:
        store.put_message_hooks.append(TimerMessageHook(store.config, None))
        r = store.put_messages((message({"TIMER_DELAY_SEC": "1"}, sys_flag=MessageSysFlag.TRANSACTION_COMMIT_TYPE),))
        assert (r.status, r.remark) == (
            PutMessageStatus.WHEEL_TIMER_NOT_ENABLE,
            "accurate timer message is not enabled, timerWheelEnable is false",
        )
        r = store.put_message_batch(batch([{}], "TIMER_DELIVER_MS\x01" + str(now_ms() + 5000)))
        assert r.status is PutMessageStatus.WHEEL_TIMER_NOT_ENABLE
        assert store.get_max_phy_offset() == 0
        assert store.put_messages((message({"KEYS": "k"}),)).is_ok()  # no timer property: stored
    finally:
        store.shutdown()


def test_a_recall_needs_pub_on_its_topic(tmp_path) -> None:
    """With aclEnable, RECALL_MESSAGE is a send to its topic (5.3.3's authorization): else any
    signed account holding a handle could take back another's message."""
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "plain_acl.yml").write_text(
        "accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    admin: false\n"
        "    defaultTopicPerm: DENY\n    defaultGroupPerm: SUB\n"
        "    topicPerms:\n      - topicB=PUB\n      - topicC=SUB\n"
    )
    v = PlainAccessValidator(PlainPermissionManager(tmp_path))
    signer = SessionCredentials("RocketMQ", "12345678")

    def refused(topic: str) -> str | None:
        cmd = RemotingCommand(code=RequestCode.RECALL_MESSAGE, ext_fields={"producerGroup": "PG", "topic": topic,
                                                                          "recallHandle": "x"})  # fmt: skip
        signer.sign_request(cmd)
        try:
            v.check("127.0.0.1:50000", cmd)
        except RequestRefused as e:
            return e.remark
        return None

    assert refused("topicB") is None
    assert "No default permission for topic:topicC" in (refused("topicC") or "")
