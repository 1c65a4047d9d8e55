"""MessageExt.msg_id is Java's MessageClientExt.getMsgId(): the UNIQ_KEY, else the offset msgId
(issue 31, point 2), however the message was made."""

from __future__ import annotations

from pumice.client.message import PROPERTY_UNIQ_KEY, MessageExt

OFFSET_ID = "7F00000100002A9F0000000000000100"


def test_a_message_without_a_uniq_key_is_known_by_its_offset_msg_id() -> None:
    m = MessageExt(topic="T", body=b"x", properties={}, offset_msg_id=OFFSET_ID)
    assert (m.msg_id, m.offset_msg_id) == (OFFSET_ID, OFFSET_ID)


def test_the_uniq_key_wins() -> None:
    m = MessageExt(topic="T", body=b"x", properties={PROPERTY_UNIQ_KEY: "U" * 32}, offset_msg_id=OFFSET_ID)
    assert m.msg_id == "U" * 32
    assert MessageExt(topic="T", body=b"x", properties={}, msg_id="given", offset_msg_id=OFFSET_ID).msg_id == "given"
