"""Transactional producers: RocketMQ's TransactionMQProducer for asyncio (and its blocking twin).

``send_message_in_transaction(msg, arg)`` sends a half message (properties TRAN_MSG "true" and
PGROUP, sysFlag PREPARED), runs the listener's ``execute_local_transaction(msg, arg)`` once the
broker has stored it, and ends the transaction with a oneway END_TRANSACTION:

===============================  ======================================================
extField                         value
===============================  ======================================================
``producerGroup``                this producer's group
``tranStateTableOffset``         the half's queue offset (the send result's)
``commitLogOffset``              the half's CommitLog offset, from its offset msgId
``commitOrRollback``             8 COMMIT_MESSAGE, 12 ROLLBACK_MESSAGE, 0 UNKNOW
``fromTransactionCheck``         ``false``; ``true`` in the answer to a check
``msgId`` / ``transactionId``    the message's UNIQ_KEY
===============================  ======================================================

A half the broker could store but not flush or replicate (FLUSH_DISK_TIMEOUT,
FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE) is rolled back without running the local
transaction, as the Java client does; a listener that raises leaves the state UNKNOW.

When the broker's check asks about a half (CHECK_TRANSACTION_STATE, oneway, the half as its
body), the listener's ``check_local_transaction(msg)`` answers and the producer sends
END_TRANSACTION with ``fromTransactionCheck`` true to that broker. Any producer of the group
may be asked, also one that did not send the half: each learns the brokers that hold TBW102 at
start, and heartbeats to them, as the Java producer does. Listener methods may be plain or
``async``; plain ones run in a worker thread.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from pumice.client.exceptions import MQClientError
from pumice.client.message import Message, MessageExt, SendResult, SendStatus, decode_messages
from pumice.client.producer import AsyncProducer, Producer
from pumice.common.message_const import MessageConst
from pumice.common.message_decoder import decode_message_id
from pumice.common.message_sys_flag import MessageSysFlag
from pumice.common.mix_all import AUTO_CREATE_TOPIC_KEY_TOPIC, DEFAULT_PRODUCER_GROUP
from pumice.remoting.remoting_command import RemotingCommand
from pumice.remoting.request_code import RequestCode

log = logging.getLogger(__name__)


class LocalTransactionState(Enum):
    COMMIT_MESSAGE = MessageSysFlag.TRANSACTION_COMMIT_TYPE
    ROLLBACK_MESSAGE = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
    UNKNOW = MessageSysFlag.TRANSACTION_NOT_TYPE  # RocketMQ's spelling


class TransactionListener(Protocol):
    def execute_local_transaction(self, msg: Message, arg: Any) -> Any: ...

    def check_local_transaction(self, msg: MessageExt) -> Any: ...


@dataclass
class TransactionSendResult(SendResult):
    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW


async def _call(fn: Any, *args: Any) -> LocalTransactionState:
    if inspect.iscoroutinefunction(fn):
        state = await fn(*args)
    else:
        state = await asyncio.to_thread(fn, *args)
        if inspect.isawaitable(state):
            state = await state
    if not isinstance(state, LocalTransactionState):
        raise TypeError(f"a transaction listener returned {state!r}, not a LocalTransactionState")
    return state


class AsyncTransactionProducer(AsyncProducer):
    """``AsyncProducer`` plus ``send_message_in_transaction`` (see the module docstring)."""

    def __init__(
        self,
        group: str = DEFAULT_PRODUCER_GROUP,
        namesrv_addr: str = "127.0.0.1:9876",
        *,
        transaction_listener: TransactionListener,
        **kwargs: Any,
    ) -> None:
        super().__init__(group, namesrv_addr, **kwargs)
        self.transaction_listener = transaction_listener

    async def start(self) -> None:
        if self.started:
            return
        self.instance.register_transaction_checker(self.group, self._check)
        await super().start()
        # as the Java producer (its TBW102 publish info): learn the brokers that take new topics
        # and heartbeat to them now, so their checks reach this producer before it sends
        try:
            await self.instance.get_topic_route(AUTO_CREATE_TOPIC_KEY_TOPIC)
        except MQClientError as e:
            log.info("no route of %s (%s): this producer is known to a broker once it sends there",
                     AUTO_CREATE_TOPIC_KEY_TOPIC, e)  # fmt: skip

    async def shutdown(self) -> None:
        self.instance.unregister_transaction_checker(self.group)
        await super().shutdown()

    async def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        if not self.started:
            raise MQClientError("the transaction producer is not started")
        props, body, sys_flag = self._prepare(msg)
        props.pop(MessageConst.PROPERTY_DELAY_TIME_LEVEL, None)  # a half is never delayed
        props[MessageConst.PROPERTY_TRANSACTION_PREPARED] = "true"
        props[MessageConst.PROPERTY_PRODUCER_GROUP] = self.group
        sys_flag |= MessageSysFlag.TRANSACTION_PREPARED_TYPE
        sent = await self._send(msg, props, body, sys_flag, mq=None, selector=None, arg=None, timeout_s=None,
                                batch=False, oneway=False)  # fmt: skip
        assert sent is not None
        error: BaseException | None = None
        if sent.send_status is SendStatus.SEND_OK:
            try:
                state = await _call(self.transaction_listener.execute_local_transaction, msg, arg)
            except Exception as e:  # the check will ask again
                log.warning("executeLocalTransaction of %s raised: %s", sent.msg_id, e)
                state, error = LocalTransactionState.UNKNOW, e
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        try:
            await self._end_transaction(sent, state, error)
        except Exception as e:  # the broker's check will ask about it
            log.warning("END_TRANSACTION of %s (%s) not sent: %s", sent.msg_id, state.name, e)
        return TransactionSendResult(sent.send_status, sent.msg_id, sent.offset_msg_id, sent.message_queue,
                                     sent.queue_offset, sent.transaction_id, state)  # fmt: skip

    async def _end_transaction(
        self, sent: SendResult, state: LocalTransactionState, error: BaseException | None
    ) -> None:
        (host, port), commit_log_offset = decode_message_id(sent.offset_msg_id or sent.msg_id)
        addr = self.instance.find_broker_addr(sent.message_queue.broker_name, only_this_broker=True)
        if addr is None:
            addr = f"{'.'.join(str(b) for b in host)}:{port}"
        fields = {
            "producerGroup": self.group, "tranStateTableOffset": str(sent.queue_offset),
            "commitLogOffset": str(commit_log_offset), "commitOrRollback": str(state.value),
            "fromTransactionCheck": "false", "msgId": sent.msg_id, "transactionId": sent.transaction_id or sent.msg_id,
        }  # fmt: skip
        remark = f"executeLocalTransactionBranch exception: {error}" if error is not None else None
        request = RemotingCommand(code=RequestCode.END_TRANSACTION, ext_fields=fields, remark=remark)
        await self.instance.api.remoting.invoke_oneway(addr, request)

    async def _check(self, addr: str, request: RemotingCommand) -> None:
        """A broker's CHECK_TRANSACTION_STATE: ask the listener, answer with END_TRANSACTION."""
        msgs = decode_messages(request.body or b"")
        if not msgs:
            log.warning("a transaction check from %s without a message: ignored", addr)
            return
        msg = msgs[0]
        uniq = msg.properties.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id
        error: BaseException | None = None
        try:
            state = await _call(self.transaction_listener.check_local_transaction, msg)
        except Exception as e:
            log.warning("checkLocalTransaction of %s raised: %s", uniq, e)
            state, error = LocalTransactionState.UNKNOW, e
        fields = {
            "producerGroup": self.group, "tranStateTableOffset": request.ext_str("tranStateTableOffset") or "0",
            "commitLogOffset": request.ext_str("commitLogOffset") or "0", "commitOrRollback": str(state.value),
            "fromTransactionCheck": "true", "msgId": uniq,
            "transactionId": request.ext_str("transactionId") or uniq,
        }  # fmt: skip
        remark = f"checkLocalTransactionState Exception: {error}" if error is not None else None
        await self.instance.api.remoting.invoke_oneway(
            addr, RemotingCommand(code=RequestCode.END_TRANSACTION, ext_fields=fields, remark=remark)
        )


class TransactionProducer(Producer):
    """The blocking ``AsyncTransactionProducer`` (listener methods run in worker threads)."""

    impl: AsyncTransactionProducer  # type: ignore[assignment]

    def __init__(
        self, group: str = DEFAULT_PRODUCER_GROUP, namesrv_addr: str = "127.0.0.1:9876", **kwargs: Any
    ) -> None:  # AsyncTransactionProducer's arguments
        if "transaction_listener" not in kwargs:  # before the background loop starts
            raise TypeError("TransactionProducer needs transaction_listener=")
        super(Producer, self).__init__(
            f"pumice-tx-producer-{group}", lambda: AsyncTransactionProducer(group, namesrv_addr, **kwargs)
        )

    def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        return self._loop.run(self.impl.send_message_in_transaction(msg, arg))
