"""RocketMQ 4.9.8's default value of each key Pumice accepts and ignores (the ``IGNORED_KEYS``
tables), so that a key at its default says nothing at start: a whole ``mqbroker -p`` dump used
as broker.conf would otherwise warn about some 80 keys that ask for nothing.

The values are the 4.9.8 config classes' initial values (tests/data/rocketmq-4.9.8-config-keys.tsv;
tests/unit/test_rocketmq_conf_samples.py checks this table against it); those that depend on
the machine are computed here as Java computes them from ``availableProcessors()``. ``None``: the
field starts null (an empty value, or ``null`` as ``mqbroker -p`` prints it).

=====================================  ===================================================
key                                    RocketMQ 4.9.8's default
=====================================  ===================================================
sendMessageThreadPoolNums,             min(CPUs, 4)
putMessageFutureThreadPoolNums
processReplyMessageThreadPoolNums      16 + 2 x CPUs
heartbeatThreadPoolNums                min(32, CPUs)
endTransactionThreadPoolNums           max(8 + 2 x CPUs, 4 x sendMessageThreadPoolNums)
clientCallbackExecutorThreads          CPUs
(the others)                           ``FIXED_DEFAULTS``
=====================================  ===================================================
"""

from __future__ import annotations

import os


def _cpus() -> int:
    return os.cpu_count() or 1


FIXED_DEFAULTS: dict[str, str | None] = {
    "autoDeleteUnusedStats": "false",
    "channelNotActiveInterval": "60000",
    "clientAsyncSemaphoreValue": "65535",
    "clientChannelMaxIdleTimeSeconds": "120",
    "clientCloseSocketIfTimeout": "true",
    "clientOnewaySemaphoreValue": "65535",
    "clientPooledByteBufAllocatorEnable": "false",
    "clientSocketRcvBufSize": "0",
    "clientSocketSndBufSize": "0",
    "clientWorkerThreads": "4",
    "clusterTest": "false",
    "commercialBaseCount": "1",
    "commercialBigCount": "1",
    "commercialEnable": "true",
    "commercialTimerCount": "1",
    "commercialTransCount": "1",
    "compressedRegister": "false",
    "connectTimeoutMillis": "3000",
    "consumerFallbehindThreshold": "17179869184",
    "dLegerGroup": None,
    "dLegerPeers": None,
    "dLegerSelfId": None,
    "debugLockEnable": "false",
    "defaultQueryMaxNum": "32",
    "disableConsumeIfConsumerReadSlowly": "false",
    "diskFallRecorded": "true",
    "duplicationEnable": "false",
    "enableBatchPush": "false",
    "enableDLegerCommitLog": "false",
    "enableDetailStat": "true",
    "enableLmq": "false",
    "enableMultiDispatch": "false",
    "enableScheduleAsyncDeliver": "false",
    "enableScheduleMessageStats": "true",
    "endTransactionPoolQueueCapacity": "100000",
    "fastFailIfNoBufferInStorePool": "false",
    "fetchNamesrvAddrByAddressServer": "false",
    "filterServerNums": "0",
    "flushConsumerOffsetHistoryInterval": "60000",
    "flushDelayOffsetInterval": "10000",
    "flushLeastPagesWhenWarmMapedFile": "4096",
    "forceRegister": "true",
    "heartbeatThreadPoolQueueCapacity": "50000",
    "highSpeedMode": "false",
    "isEnableBatchPush": "false",
    "maxDelayTime": "40",
    "maxLmqConsumeQueueNum": "20000",
    "maxMsgsNumBatch": "64",
    "messageStorePlugIn": "",
    "preferredLeaderId": None,
    "productEnvName": "center",
    "putMsgIndexHightWater": "600000",
    "putThreadPoolQueueCapacity": "10000",
    "readOnlyCommitLogStorePaths": None,
    "registerBrokerTimeoutMills": "6000",
    "replyThreadPoolQueueCapacity": "10000",
    "scheduleAsyncDeliverMaxPendingLimit": "2000",
    "scheduleAsyncDeliverMaxResendNum2Blocked": "3",
    "serverAsyncSemaphoreValue": "64",
    "serverCallbackExecutorThreads": "0",
    "serverOnewaySemaphoreValue": "256",
    "serverPooledByteBufAllocatorEnable": "true",
    "serverSelectorThreads": "3",
    "serverSocketBacklog": "1024",
    "serverSocketRcvBufSize": "0",
    "serverSocketSndBufSize": "0",
    "serverWorkerThreads": "8",
    "slaveTimeout": "3000",
    "startAcceptSendRequestTimeStamp": "0",
    "storePathDLedgerCommitLog": None,
    "transferMsgByHeap": "true",
    "useEpollNativeSelector": "false",
    "useReentrantLockWhenPutMessage": "true",
    "useTLS": "false",
    "waitTimeMillsInTransactionQueue": "3000",
    "writeBufferHighWaterMark": "0",
    "writeBufferLowWaterMark": "0",
}


def rocketmq_default(key: str) -> tuple[bool, str | None]:
    """(known, default) of an ignored key: (False, None) for a key 4.9.8 does not have."""
    cpus = _cpus()
    computed = {
        "sendMessageThreadPoolNums": min(cpus, 4),
        "putMessageFutureThreadPoolNums": min(cpus, 4),
        "processReplyMessageThreadPoolNums": 16 + 2 * cpus,
        "heartbeatThreadPoolNums": min(32, cpus),
        "endTransactionThreadPoolNums": max(8 + 2 * cpus, 4 * min(cpus, 4)),
        "clientCallbackExecutorThreads": cpus,
    }
    if key in computed:
        return True, str(computed[key])
    if key in FIXED_DEFAULTS:
        return True, FIXED_DEFAULTS[key]
    return False, None


def at_rocketmq_default(key: str, value: str) -> bool:
    """Whether ``key=value`` is what RocketMQ 4.9.8 starts with (as Java would read the value)."""
    known, default = rocketmq_default(key)
    if not known:
        return False
    v = value.strip()
    if default is None:
        return v in ("", "null")
    if default in ("true", "false"):
        return v.lower() == default
    try:
        return int(v) == int(default)
    except ValueError:
        return v == default
