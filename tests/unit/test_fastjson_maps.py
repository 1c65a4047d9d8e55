"""Maps keyed by MessageQueue as RocketMQ 4.9's fastjson writes them (issue 31, point 1): the
keys bare, in a Java HashMap's order; and every reader of such a body takes both forms."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from pumice.client.admin import json_body
from pumice.client.client_remoting_processor import process
from pumice.client.message import MessageQueue
from pumice.common import fastjson
from pumice.common.message_queue_map import message_queue_hash, message_queue_table, message_queue_table_of
from pumice.common.route_data import loads_lenient
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode

# a 4.9.7 broker's ResetOffsetBody for broker-d's DiffT (tests/oracle/test_same_requests.py)
JAVA_RESET = (
    b'{"offsetTable":{{"brokerName":"broker-d","queueId":3,"topic":"DiffT"}:0,'
    b'{"brokerName":"broker-d","queueId":1,"topic":"DiffT"}:1,'
    b'{"brokerName":"broker-d","queueId":2,"topic":"DiffT"}:0,'
    b'{"brokerName":"broker-d","queueId":0,"topic":"DiffT"}:7}}'
)


def test_a_message_queue_table_is_written_as_the_java_broker_writes_it() -> None:
    table = message_queue_table(("DiffT", "broker-d", q, off) for q, off in enumerate((7, 1, 0, 0)))
    assert fastjson.dumps({"offsetTable": table}) == JAVA_RESET


def test_message_queue_hash_is_javas() -> None:
    # new MessageQueue("T", "b", 3).hashCode(): 31 * (31 * (31 + 98) + 3) + 84
    assert message_queue_hash("T", "b", 3) == 31 * (31 * (31 + 98) + 3) + 84
    # int overflow wraps as in Java
    assert -(1 << 31) <= message_queue_hash("a-long-topic-name" * 4, "broker-name-x", 1 << 30) < 1 << 31


def test_bare_object_keys_read_back_as_the_quoted_form() -> None:
    data = fastjson.loads(JAVA_RESET)
    keys = list(data["offsetTable"])
    assert keys[0] == '{"brokerName":"broker-d","queueId":3,"topic":"DiffT"}'
    assert orjson.loads(keys[3]) == {"brokerName": "broker-d", "queueId": 0, "topic": "DiffT"}
    assert data["offsetTable"][keys[3]] == 7
    # written again, byte for byte
    assert fastjson.dumps({"offsetTable": message_queue_table_of(data["offsetTable"])}) == JAVA_RESET


def test_orjson_refuses_an_object_key_so_none_goes_out_quoted() -> None:
    with pytest.raises(TypeError):
        orjson.dumps({message_queue_table([("T", "b", 0, 1)]).popitem()[0]: 1})


def test_the_reader_takes_nested_maps_numbers_and_escapes() -> None:
    raw = (
        b' {"consumerTable" : {"c@1": {{"brokerName":"b","queueId":0,"topic":"T\\u00e9\\"x"} : 5}},'
        b' "byId": {0:"a", -1:"b"}, "list": [1, 2.5, true, false, null, {"k": []}], "e": {}}'
    )
    data = fastjson.loads(raw)
    (key,) = data["consumerTable"]["c@1"]
    assert orjson.loads(key)["topic"] == 'Té"x'
    assert data["byId"] == {"0": "a", "-1": "b"}
    assert data["list"] == [1, 2.5, True, False, None, {"k": []}]
    assert data["e"] == {}


@pytest.mark.parametrize(
    "bad",
    [b'{{"a":1}:', b'{"a" 1}', b"{1:2,}", b"[1 2]", b'{"a":1} x', b'{"a":"\x01"}', b"{" * 300 + b"}" * 300],
)
def test_bad_json_is_a_decode_error(bad: bytes) -> None:
    with pytest.raises(orjson.JSONDecodeError):
        fastjson.loads(bad)


def test_a_key_that_is_not_a_message_queue_is_refused() -> None:
    with pytest.raises(ValueError, match="not a MessageQueue key"):
        message_queue_table_of({"0": 1})
    quoted = {f'{{"brokerName":"broker-d","queueId":{q},"topic":"DiffT"}}': q for q in range(4)}
    assert fastjson.dumps(message_queue_table_of(quoted)) == fastjson.dumps(
        message_queue_table(("DiffT", "broker-d", q, q) for q in range(4))
    )


def test_the_clients_readers_take_bare_keys() -> None:
    assert set(loads_lenient(JAVA_RESET)["offsetTable"].values()) == {0, 1, 7}
    assert len(json_body(JAVA_RESET)["offsetTable"]) == 4


class _Consumer:
    group = "G"

    def __init__(self) -> None:
        self.resets: list[tuple[str, dict[MessageQueue, int]]] = []

    async def reset_offset(self, topic: str, table: dict[MessageQueue, int]) -> None:
        self.resets.append((topic, table))

    async def consumer_status(self, topic: str) -> dict[MessageQueue, int]:
        return {MessageQueue(topic, "broker-d", q): 10 + q for q in range(4)}

    def running_info(self) -> dict[str, Any]:
        return {"mqTable": {}}

    async def consume_directly(self, record: bytes, broker_name: str | None) -> dict[str, Any]:
        return {}


def test_the_python_client_applies_a_reset_in_the_java_brokers_form() -> None:
    consumer = _Consumer()
    request = RemotingCommand(
        code=RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
        ext_fields={"topic": "DiffT", "group": "G", "timestamp": "0", "isForce": "false"},
        body=JAVA_RESET,
    )
    assert asyncio.run(process({"G": consumer}, request)) is None
    assert consumer.resets == [("DiffT", {MessageQueue("DiffT", "broker-d", q): o for q, o in enumerate((7, 1, 0, 0))})]


def test_the_python_client_answers_its_status_with_bare_keys() -> None:
    request = RemotingCommand(
        code=RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, ext_fields={"topic": "DiffT", "group": "G"}
    )
    response = asyncio.run(process({"G": _Consumer()}, request))
    assert response is not None
    assert bytes(response.body) == fastjson.dumps(
        {"messageQueueTable": message_queue_table(("DiffT", "broker-d", q, 10 + q) for q in range(4))}
    )
    assert bytes(response.body).startswith(b'{"messageQueueTable":{{"brokerName":"broker-d","queueId":3,')


def test_braces_and_colons_inside_strings_are_not_keys() -> None:
    raw = b'{"a":"{\\"x\\":1}:","b":"12:","m":{{"brokerName":"b:{}","queueId":0,"topic":"T"}:1,7:[{"k":"}"}]}}'
    data = fastjson.loads(raw)
    assert (data["a"], data["b"]) == ('{"x":1}:', "12:")
    assert data["m"] == {'{"brokerName":"b:{}","queueId":0,"topic":"T"}': 1, "7": [{"k": "}"}]}


def test_a_nested_object_key_takes_the_full_parser() -> None:
    assert fastjson.loads(b'{{"a":{"b":1}}:2}') == {'{"a":{"b":1}}': 2}
