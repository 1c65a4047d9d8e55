"""MQVersion ordinals against values RocketMQ itself gives: PROTOCOL.md's list (seen on the wire
or read from MQVersion.java) and 4.9.8's enum (612 names; CURRENT_VERSION V4_9_8 = 409)."""

from __future__ import annotations

import pytest

from pumice.remoting.mq_version import CURRENT_VERSION, version_desc, version_ordinal
from pumice.remoting.remoting_command import RemotingCommand


@pytest.mark.parametrize(
    ("name", "ordinal"),
    [
        ("V3_0_0_SNAPSHOT", 0),
        ("V3_0_7_SNAPSHOT", 28),  # Broker2Client: the oldest client that takes a reset
        ("V3_1_8_SNAPSHOT", 62),
        ("V3_1_8", 63),  # the C++ client
        ("V3_4_9", 121),
        ("V4_0_0", 213),
        ("V4_9_4", 401),
        ("V4_9_8", 409),
        ("V5_0_0", 413),
        ("V5_3_3", 479),
        ("V5_9_9", 611),
    ],
)
def test_ordinals_match_rocketmq(name: str, ordinal: int) -> None:
    assert version_ordinal(name) == ordinal and version_desc(ordinal) == name


def test_an_ordinal_past_the_end_names_the_last_and_unknown_names_are_refused() -> None:
    assert version_desc(612) == version_desc(10_000) == "V5_9_9"  # as MQVersion.getVersionDesc
    assert version_desc(-1) == "-1"
    with pytest.raises(ValueError, match="V3_3_0"):
        version_ordinal("V3_3_0")  # 3.3 to 3.9 start at patch 1


def test_requests_and_responses_carry_v4_9_8_whatever_the_request_said() -> None:
    assert version_desc(CURRENT_VERSION) == "V4_9_8"
    request = RemotingCommand(code=105, version=63)  # the C++ client's V3_1_8
    assert RemotingCommand(code=105).version == 409
    assert request.make_response(0).version == 409  # a 4.9.8 broker's createResponseCommand
