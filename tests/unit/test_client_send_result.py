"""SEND_MESSAGE_V2's answer turned into a SendResult (issue 33's client send path), against a
broker stand-in on a real socket: the queue sent to is reused, a status outside the send codes
is an MQBrokerError, and fields that are not integers are a clear MQClientError (stored, so not
retried), never a bare ValueError."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from pumice.client.exceptions import MQBrokerError, MQClientError
from pumice.client.message import MessageQueue, SendStatus
from pumice.client.mq_client_api import MQClientAPIImpl
from pumice.remoting.remoting_codec import FrameDecoder, encode_bytes
from pumice.remoting.response_code import ResponseCode


def _answering(
    code: int, ext: dict[str, str]
) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder()
        try:
            for _ in range(10):  # bounded: the test sends at most a few requests
                head = await reader.readexactly(4)
                (n,) = struct.unpack(">i", head)
                for cmd in decoder.feed(head + await reader.readexactly(n)):
                    writer.write(encode_bytes(cmd.make_response(code, ext_fields=dict(ext))))
                await writer.drain()
        except asyncio.IncompleteReadError:
            pass
        finally:
            writer.close()

    return handle


def _send(code: int, ext: dict[str, str], mq: MessageQueue | None) -> Any:
    async def main() -> Any:
        srv = await asyncio.start_server(_answering(code, ext), "127.0.0.1", 0)
        addr = f"127.0.0.1:{srv.sockets[0].getsockname()[1]}"
        api = MQClientAPIImpl(timeout_s=5.0)
        try:
            return await api.send_message(
                addr, "b0", group="G", topic="T", queue_id=3, body=b"x", uniq_id="U" * 32, mq=mq
            )
        finally:
            await api.close()
            srv.close()
            await srv.wait_closed()

    return asyncio.run(asyncio.wait_for(main(), 20))


def test_the_queue_sent_to_is_the_results_queue() -> None:
    mq = MessageQueue("T", "b0", 3)
    r = _send(ResponseCode.SUCCESS, {"msgId": "M", "queueId": "3", "queueOffset": "41"}, mq)
    assert r.message_queue is mq and r.queue_offset == 41 and r.send_status is SendStatus.SEND_OK
    assert (r.msg_id, r.offset_msg_id) == ("U" * 32, "M")
    # the broker put it elsewhere: a queue of its own answer
    r = _send(ResponseCode.FLUSH_DISK_TIMEOUT, {"msgId": "M", "queueId": "5", "queueOffset": "7"}, mq)
    assert r.message_queue == MessageQueue("T", "b0", 5) and r.send_status is SendStatus.FLUSH_DISK_TIMEOUT


def test_a_code_outside_the_send_codes_is_a_broker_error() -> None:
    with pytest.raises(MQBrokerError) as e:
        _send(ResponseCode.SYSTEM_BUSY, {}, None)
    assert e.value.code == ResponseCode.SYSTEM_BUSY


@pytest.mark.parametrize("ext", [{"queueId": "x", "queueOffset": "1"}, {"queueId": "1", "queueOffset": "1.5"}])
def test_fields_that_are_not_integers_are_a_client_error(ext: dict[str, str]) -> None:
    with pytest.raises(MQClientError, match="not integers") as e:
        _send(ResponseCode.SUCCESS, {"msgId": "M", **ext}, None)
    assert not isinstance(e.value, MQBrokerError)  # not retried: the broker stored the message
