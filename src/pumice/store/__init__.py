"""The message store: CommitLog, ConsumeQueue, IndexFile and dispatch (RocketMQ 4.9 format)."""

from pumice.common.message import MessageExt, MessageExtBrokerInner
from pumice.common.message_const import MessageConst
from pumice.common.message_sys_flag import MessageSysFlag
from pumice.store.get_message_result import GetMessageResult, GetMessageStatus
from pumice.store.message_store import DefaultMessageStore, StoreLockedError
from pumice.store.message_store_config import BrokerRole, FlushDiskType, MessageStoreConfig
from pumice.store.put_message_result import PutMessageResult, PutMessageStatus

__all__ = [
    "BrokerRole",
    "DefaultMessageStore",
    "FlushDiskType",
    "GetMessageResult",
    "GetMessageStatus",
    "MessageConst",
    "MessageExt",
    "MessageExtBrokerInner",
    "MessageStoreConfig",
    "MessageSysFlag",
    "PutMessageResult",
    "PutMessageStatus",
    "StoreLockedError",
]
