"""broker.conf: RocketMQ's keys, the ones Pumice accepts without a use, and ``-p`` output."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from pumice.broker.broker_config import BrokerConfig, load_broker_config
from pumice.config import ConfigError, to_properties
from pumice.store.message_store_config import MessageStoreConfig
from tests.helpers.config_keys import ignored_keys_warned

# the broker.conf of seed 000 (A2), as most RocketMQ guides give it; its one broken line
# ("autoCreateSubscriptionGroup-true") is written with "=" here, and is tested on its own below
SEED_SAMPLE = """\
#所属集群名字
brokerClusterName = DefaultCluster
brokerName = broker-a
brokerId = 0
namesrvAddr=rocketmq-namesrv1:9876;rocketmq-namesrv2:9876
defaultTopicQueueNums=4
autoCreateTopicEnable=true
autoCreateSubscriptionGroup=true
listenPort=10911
deleteWhen = 04
fileReservedTime = 48
mapedFileSizeCommitLog=1073741824
mapedFileSizeConsumeQueue=30000
# destroyMapedFileIntervalForcibly=12000
diskMaxUsedSpaceRatio=88
storePathRootDir={root}
storePathCommitLog={root}/commitlog
storePathConsumeQueue={root}/consumequeue
storePathIndex={root}/index
storeCheckpoint={root}/checkpoint
abortFile={root}/abort
maxMessageSize=65536
brokerRole=ASYNC_MASTER
flushDiskType=ASYNC_FLUSH
checkTransactionMessageEnable=false
sendMessageTreadPoolNums=128
pullMessageTreadPoolNums=128
"""

# the other keys the seeds name (BrokerConfig, NettyServerConfig, NettyClientConfig, TLS)
OTHER_SEED_KEYS = """\
rocketmqHome=/opt/rocketmq
brokerPermission=6
clusterTopicEnable=true
brokerTopicEnable=true
traceTopicEnable=false
msgTraceTopicName=RMQ_SYS_TRACE_TOPIC
sendThreadPoolQueueCapacity=10000
pullThreadPoolQueueCapacity=100000
replyThreadPoolQueueCapacity=10000
queryThreadPoolQueueCapacity=20000
clientManagerThreadPoolQueueCapacity=1000000
consumerManagerThreadPoolQueueCapacity=1000000
heartbeatThreadPoolQueueCapacity=50000
endTransactionPoolQueueCapacity=100000
sendMessageThreadPoolNums=1
pullMessageThreadPoolNums=20
processReplyMessageThreadPoolNums=20
queryMessageThreadPoolNums=10
adminBrokerThreadPoolNums=16
clientManageThreadPoolNums=32
heartbeatThreadPoolNums=2
endTransactionThreadPoolNums=8
consumerManageThreadPoolNums=32
flushConsumerOffsetInterval=5000
fetchNamesrvAddrByAddressServer=false
registerNameServerPeriod=30000
forceRegister=true
longPollingEnable=true
shortPollingTimeMills=1000
slaveReadEnable=false
filterSupportRetry=false
enablePropertyFilter=false
transferMsgByHeap=true
commercialBaseCount=1
serverWorkerThreads=8
serverSocketSndBufSize=65535
serverSocketRcvBufSize=65535
serverChannelMaxIdleTimeSeconds=120
serverPooledByteBufAllocatorEnable=true
useTLS=false
tlsMode=permissive
accessMessageInMemoryMaxRatio=40
enableDLegerCommitLog=false
useReentrantLockWhenPutMessage=false
transientStorePoolEnable=false
duplicationEnable=false
messageIndexEnable=true
offsetCheckInSlave=false
diskFallRecorded=true
"""


def load(tmp_path: Path, text: str) -> tuple[BrokerConfig, MessageStoreConfig]:
    path = tmp_path / "broker.conf"
    path.write_text(text, encoding="utf-8")
    return load_broker_config(str(path))


def test_the_seeds_broker_conf_starts_and_keys_without_a_use_are_named_in_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "store"
    with caplog.at_level(logging.WARNING, logger="pumice.config"):
        broker, store = load(tmp_path, SEED_SAMPLE.format(root=root) + OTHER_SEED_KEYS)
    assert broker.namesrv_addrs() == ["rocketmq-namesrv1:9876", "rocketmq-namesrv2:9876"]
    assert broker.default_topic_queue_nums == 4 and store.max_message_size == 65536
    assert store.mapped_file_size_consume_queue == 30000 and store.store_path_root_dir == str(root)
    assert broker.pull_message_thread_pool_nums == 20 and broker.query_message_thread_pool_nums == 10
    ignored = ignored_keys_warned(caplog.text)
    # one line names them all (issue 31.5)
    assert len([r for r in caplog.records if "no effect in Pumice" in r.getMessage()]) == 1
    assert {"storePathConsumeQueue", "abortFile", "sendMessageTreadPoolNums",
            "checkTransactionMessageEnable"} <= ignored  # fmt: skip
    assert not {"serverWorkerThreads", "enableDLegerCommitLog"} & ignored  # at RocketMQ's default: not named
    assert "listenPort" not in ignored and "pullMessageThreadPoolNums" not in ignored
    assert "rocketmqHome" not in ignored  # where aclEnable finds conf/plain_acl.yml
    assert broker.rocketmq_home is not None and not broker.acl_enable


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("autoCreateSubscriptionGroup-true", "autoCreateSubscriptionGroup-true"),  # the seed's broken line
        ("noSuchKey=1", "unknown key 'noSuchKey'"),
        (
            "tlsMode=enforcing\ntlsTestModeEnable=false",
            "tlsMode=enforcing with tlsTestModeEnable=false needs tlsServerCertPath and tlsServerKeyPath",
        ),
        ("tlsServerCertPath=/etc/cert.pem", "tlsServerCertPath and tlsServerKeyPath go together"),
        ("tlsMode=sometimes", "tlsMode=sometimes: expected one of disabled, permissive, enforcing"),
        ("enableDLegerCommitLog=true", "enableDLegerCommitLog=true needs dLegerGroup"),
        ("fetchNamesrvAddrByAddressServer=true", "there is no address server"),
        ("pullMessageThreadPoolNums=0", "pullMessageThreadPoolNums 0 must be 1 or more"),
        ("serverChannelMaxIdleTimeSeconds=-1", "serverChannelMaxIdleTimeSeconds -1 is negative"),
        # the HA port would be 65536 (a traceback from bind), the fast port -1
        ("listenPort=65535", "listenPort 65535 is not 0 (any free port) or 3 to 65534"),
        ("listenPort=1", "listenPort 1 is not 0 (any free port) or 3 to 65534"),
        # a slave's fixed master address (a traceback from the HA client before)
        ("haMasterAddress=garbage", "haMasterAddress 'garbage' is not host:port"),
        ("haMasterAddress=host:99999", "haMasterAddress 'host:99999' is not host:port"),
        ("brokerPermission=16", "brokerPermission 16 is not 0 to 15"),
        ("maxMessageSize=99999999999999", "bad value for maxMessageSize: '99999999999999'"),
    ],
)
def test_a_key_asking_for_what_pumice_lacks_stops_start_up_naming_it(tmp_path: Path, line: str, message: str) -> None:
    with pytest.raises((ConfigError, ValueError), match=re.escape(message)):
        load(tmp_path, f"listenPort=10911\n{line}\n")


def test_printed_config_loads_back_to_the_same_config(tmp_path: Path) -> None:
    """``pumice broker -p`` (and GET_BROKER_CONFIG): RocketMQ names (brokerIP1), true/false,
    unset keys left out, so the output is a broker.conf that gives the same config again."""
    broker, store = load(tmp_path, f"storePathRootDir={tmp_path}/s\nbrokerIP1=10.0.0.7\nslaveReadEnable=true\n")
    text = to_properties(broker, store)
    assert "brokerIP1=10.0.0.7\n" in text and "slaveReadEnable=true\n" in text
    assert "warmMapedFileEnable=false\n" in text and "preallocateCommitLog" not in text  # 4.9's name
    assert "namesrvAddr" not in text and "None" not in text and "True" not in text
    assert load(tmp_path, text) == (broker, store)


@pytest.mark.parametrize(("period", "seconds"), [(1000, 10.0), (30_000, 30.0), (45_500, 45.5), (100_000, 60.0)])
def test_the_register_period_is_clamped_to_10_to_60_s(period: int, seconds: float) -> None:
    assert BrokerConfig(register_name_server_period=period).register_period_s == seconds


def test_a_config_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_bytes(b"brokerName=caf\xe9\n")  # Latin-1
    with pytest.raises(ConfigError, match=re.escape(f"config file {conf} is not UTF-8 text")):
        load_broker_config(str(conf))


def test_a_partial_frame_budget_smaller_than_one_frame_is_refused() -> None:
    """serverMaxPartialFrameBytes under serverMaxFrameLength would refuse a frame of the largest
    size even from a client alone: refused at start, naming both keys (broker and name server)."""
    from pumice.namesrv.namesrv_config import NamesrvConfig

    for config in (BrokerConfig(), NamesrvConfig()):
        assert config.server_max_partial_frame_bytes == 256 * 1024 * 1024
        config.validate()
        config.server_max_partial_frame_bytes = config.server_max_frame_length - 1
        with pytest.raises(ValueError, match=r"serverMaxPartialFrameBytes \d+ is under serverMaxFrameLength"):
            config.validate()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("mappedFileSizeCommitLog=100", "mappedFileSizeCommitLog 100 must be at least 4096"),
        ("mapedFileSizeCommitLog=100", "mappedFileSizeCommitLog 100 must be at least 4096"),
        ("mappedFileSizeConsumeQueue=30001", "mappedFileSizeConsumeQueue 30001 must be a multiple of 20"),
        ("brokerPermission=99", "brokerPermission 99 is not 0 to 15"),
    ],
)
def test_a_bad_value_is_named_with_its_file_and_4_9_8_s_spelling(tmp_path: Path, line: str, message: str) -> None:
    with pytest.raises(ValueError) as e:  # `pumice broker` prints it as it is
        load(tmp_path, line + "\n")
    assert str(e.value).startswith(f"{tmp_path / 'broker.conf'}: {message}"), str(e.value)
    assert "maped" not in str(e.value)


DLEDGER_SAMPLE = Path(__file__).parents[1] / "data" / "rocketmq-4.9.8-conf" / "dledger" / "broker-n1.conf"


def test_dledger_keys_are_read_under_rocketmqs_spelling(tmp_path: Path) -> None:
    """The distribution's conf/dledger/broker-n1.conf as it is: every DLedger key lands in its
    field, and BrokerStartup's brokerId -1."""
    broker, store = load_broker_config(str(DLEDGER_SAMPLE))
    assert broker.broker_id == -1
    assert store.enable_d_leger_commit_log and store.d_leger_group == "RaftNode00" and store.d_leger_self_id == "n1"
    assert store.dledger_peer_map == {"n0": "127.0.0.1:40911", "n1": "127.0.0.1:40912", "n2": "127.0.0.1:40913"}
    assert store.dledger_node_number == 1
    assert store.dledger_data_dir == "/tmp/rmqstore/node01/dledger-n1/data"
    conf = tmp_path / "b.conf"
    base = DLEDGER_SAMPLE.read_text()
    conf.write_text(base + "storePathDLedgerCommitLog=/data/dl\npreferredLeaderId=n2\nenableBatchPush=true\n")
    _, store = load_broker_config(str(conf))
    assert (store.dledger_data_dir, store.preferred_leader_id, store.enable_batch_push) == ("/data/dl", "n2", True)
    for extra, why in [
        ("dLegerSelfId=n7\n", "dLegerSelfId 'n7' is not one of dLegerPeers"),
        ("dLegerSelfId=node1\ndLegerPeers=node1-127.0.0.1:1\n", "must be one character and a number"),
        ("dLegerPeers=n0-nowhere;n1-127.0.0.1:2\n", "n0-nowhere is not id-host:port"),
        ("preferredLeaderId=n9\n", "preferredLeaderId 'n9' is not one of dLegerPeers"),
        ("dLegerGroup=\n", "needs dLegerGroup"),
    ]:
        conf.write_text(base + extra)
        with pytest.raises(ValueError, match=re.escape(why)):
            load_broker_config(str(conf))


def test_dledger_time_outs_are_keys_that_reach_the_node(tmp_path: Path) -> None:
    """DLedger's time-outs, each a Pumice key (DLedger's defaults), in the node's DLedgerConfig."""
    from pumice.broker.dledger_replicated_log import dledger_config_of
    from pumice.dledger.dledger_config import DLedgerConfig

    _, store = load_broker_config(str(DLEDGER_SAMPLE))
    default = dledger_config_of(store)
    ref = DLedgerConfig()
    assert (default.heart_beat_time_interval_ms, default.max_heart_beat_leak, default.min_vote_interval_ms,
            default.max_vote_interval_ms, default.max_wait_ack_time_ms, default.max_push_time_out_ms) == (
        ref.heart_beat_time_interval_ms, ref.max_heart_beat_leak, ref.min_vote_interval_ms,
        ref.max_vote_interval_ms, ref.max_wait_ack_time_ms, ref.max_push_time_out_ms)  # fmt: skip
    conf = tmp_path / "b.conf"
    base = DLEDGER_SAMPLE.read_text()
    conf.write_text(base + "dLedgerHeartBeatTimeIntervalMs=500\ndLedgerMaxHeartBeatLeak=4\n"
                    "dLedgerMinVoteIntervalMs=100\ndLedgerMaxVoteIntervalMs=200\ndLedgerMaxWaitAckTimeMs=900\n"
                    "dLedgerMaxPushTimeOutMs=700\ndLedgerMinTakeLeadershipVoteIntervalMs=10\n"
                    "dLedgerMaxTakeLeadershipVoteIntervalMs=20\n")  # fmt: skip
    _, store = load_broker_config(str(conf))
    c = dledger_config_of(store)
    assert (c.heart_beat_time_interval_ms, c.max_heart_beat_leak, c.min_vote_interval_ms, c.max_vote_interval_ms,
            c.max_wait_ack_time_ms, c.max_push_time_out_ms, c.min_take_leadership_vote_interval_ms,
            c.max_take_leadership_vote_interval_ms) == (500, 4, 100, 200, 900, 700, 10, 20)  # fmt: skip
    for extra, why in [
        ("dLedgerMaxHeartBeatLeak=0\n", "dLedgerMaxHeartBeatLeak 0 must be 1 or more"),
        ("dLedgerMinVoteIntervalMs=500\ndLedgerMaxVoteIntervalMs=400\n", "dLedgerMaxVoteIntervalMs 400 is below"),
    ]:
        conf.write_text(base + extra)
        with pytest.raises(ValueError, match=re.escape(why)):
            load_broker_config(str(conf))
