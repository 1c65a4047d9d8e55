"""Configuration files users already have: every key of RocketMQ 4.9.8 under its Java spelling,
the keys that ask for a feature Pumice lacks refused by name, and the sample confs of the 4.9.8
distribution (tests/data/rocketmq-4.9.8-conf; `pumice broker -c` on each of them:
tests/integration/test_rocketmq_conf_samples_process.py)."""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from pathlib import Path
from unittest import mock

import pytest

from pumice.broker.broker_config import BrokerConfig, load_broker_config
from pumice.config import ConfigError, apply_properties, conf_key, to_properties
from pumice.ignored_key_defaults import rocketmq_default
from pumice.namesrv.namesrv_config import NamesrvConfig
from pumice.store.message_store_config import BrokerRole, FlushDiskType, MessageStoreConfig
from tests.helpers.config_keys import ignored_keys_warned

DATA = Path(__file__).resolve().parent.parent / "data"
SAMPLES = DATA / "rocketmq-4.9.8-conf"
BROKER_CLASSES = ("BrokerConfig", "NettyServerConfig", "NettyClientConfig", "MessageStoreConfig")
NAMESRV_CLASSES = ("NamesrvConfig", "NettyServerConfig")

# RocketMQ 5.3.3's metrics keys (docs/metrics.md; metricsLabelValueLimit is Pumice's own), in
# broker.conf and, beyond 5.x, namesrv.conf
METRICS_KEYS = {
    "metricsExporterType", "metricsPromExporterHost", "metricsPromExporterPort", "metricsLabel", "metricsInDelta",
    "metricsGrpcExporterTarget", "metricsGrpcExporterHeader", "metricGrpcExporterTimeOutInMills",
    "metricGrpcExporterIntervalInMills", "metricLoggingExporterIntervalInMills", "metricsOtelCardinalityLimit",
    "metricsLabelValueLimit",
}  # fmt: skip
# keys Pumice reads besides RocketMQ 4.9.8's: its own settings, older RocketMQ spellings and keys
# of the samples most guides copy, and the camelCase of its own field names (what `pumice broker -p`
# printed before it used the Java spelling). Anything else is refused as unknown.
PUMICE_BROKER_KEYS = {
    # Pumice's own
    "listenHost", "serverMaxFrameLength", "fastListenPortEnable", "preallocateCommitLog", "prefaultCommitLog",
    "cleanResourceInitialDelay", "diskSpaceWarningLevelRatio", "diskSpaceCleanForciblyRatio", "namesrvAccessKey",
    "serverMaxPartialFrameBytes", "haAccessKey", "haWhiteRemoteAddresses", "haAllowUnauthenticated",
    "haSlaveSetAsideDivergedTail", "dLedgerHeartBeatTimeIntervalMs", "dLedgerMaxHeartBeatLeak",
    "dLedgerMinVoteIntervalMs", "dLedgerMaxVoteIntervalMs", "dLedgerMaxWaitAckTimeMs", "dLedgerMaxPushTimeOutMs",
    "dLedgerMinTakeLeadershipVoteIntervalMs", "dLedgerMaxTakeLeadershipVoteIntervalMs",
    # older RocketMQ spellings and old samples' keys
    "mapedFileSizeCommitLog", "mapedFileSizeConsumeQueue", "flushCommitLogTimedWaitEnable",
    "flushCommitTimedWaitEnable", "flushPhysicQueueLeastPages", "flushPhysicQueueThoroughInterval",
    "storePathConsumeQueue", "storePathIndex", "storeCheckpoint", "abortFile", "checkTransactionMessageEnable",
    "sendMessageTreadPoolNums", "pullMessageTreadPoolNums",
    # BrokerStartup reads these two from broker.conf into system properties
    "rmqAddressServerDomain", "rmqAddressServerSubGroup",
    # TLS settings (RocketMQ's tls.* system properties)
    "tlsMode", "tlsServerCertPath", "tlsServerKeyPath", "tlsServerTrustCertPath", "tlsTestModeEnable",
    "tlsServerNeedClientAuth",
    # the camelCase of Pumice's field names
    "brokerIp1", "brokerIp2", "useTls", "checkCrcOnRecover", "osPageCacheBusyTimeoutMills",
    "destroyMappedFileIntervalForcibly",
    # the log files' directory (RocketMQ: -Duser.home and logback's files)
    "logDir",
    # RocketMQ 5.3.3's timer keys (store/timer/, docs/v5/timer.md)
    "timerWheelEnable", "timerPrecisionMs", "timerMaxDelaySec", "mappedFileSizeTimerLog", "timerRollWindowSlot",
    "timerFlushIntervalMs", "timerCongestNumEachSlot", "timerStopEnqueue", "timerStopDequeue", "timerEnableDisruptor",
    "timerGetMessageThreadNum", "timerPutMessageThreadNum", "timerWarmEnable", "timerInterceptDelayLevel",
    "timerSkipUnknownError", "timerEnableRetryUntilSuccess", "timerEnableCheckMetrics", "timerCheckMetricsWhen",
    "timerMetricSmallThreshold", "timerProgressLogIntervalMs",
    # RocketMQ 5.3.3's POP keys (docs/v5/pop.md) and the 5.x remoting additions' (docs/v5/remoting5.md)
    "reviveQueueNum", "reviveInterval", "popPollingSize", "maxPopPollingSize", "popFromRetryProbability",
    "enableRetryTopicV2", "initPopOffsetByCheckMsgInMem", "litePullMessageEnable", "enableMixedMessageType",
    # RocketMQ 5.3.3's recall (docs/v5/timer.md)
    "recallMessageEnable", "allowRecallWhenBrokerNotWriteable",
    *METRICS_KEYS,
}  # fmt: skip
PUMICE_NAMESRV_KEYS = {"listenHost", "serverMaxFrameLength", "serverMaxPartialFrameBytes", "brokerChannelExpiredTime",
                       "scanNotActiveBrokerInterval",
                       "useTLS", "tlsMode", "tlsServerCertPath", "tlsServerKeyPath", "tlsServerTrustCertPath",
                       "tlsTestModeEnable", "tlsServerNeedClientAuth", "logDir",
                       "aclEnable", *METRICS_KEYS}  # fmt: skip  # aclEnable: RocketMQ 5's name server has it


def java_keys(*classes: str) -> dict[str, str]:
    """key → RocketMQ 4.9.8's default ("null": none), from tests/data/rocketmq-4.9.8-config-keys.tsv."""
    out: dict[str, str] = {}
    for line in (DATA / "rocketmq-4.9.8-config-keys.tsv").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            cls, key, _type, default = line.split("\t")
            if cls in classes:
                out[key] = default
    return out


def accepted_keys(*classes: type) -> set[str]:
    out: set[str] = set()
    for c in classes:
        out |= {conf_key(c, f.name) for f in dataclasses.fields(c)}
        out |= set(getattr(c, "CONF_ALIASES", {})) | set(getattr(c, "IGNORED_KEYS", {}))
    return out


def load(tmp_path: Path, text: str) -> tuple[BrokerConfig, MessageStoreConfig]:
    path = tmp_path / "broker.conf"
    path.write_text(text, encoding="utf-8")
    return load_broker_config(str(path))


def test_the_key_table_is_the_one_of_4_9_8() -> None:
    broker, namesrv = java_keys(*BROKER_CLASSES), java_keys(*NAMESRV_CLASSES)
    assert (
        len(java_keys("BrokerConfig")) == 81 and len(java_keys("MessageStoreConfig")) == 79
    )  # 78 setters, isEnableBatchPush
    assert len(java_keys("NettyServerConfig")) == len(java_keys("NettyClientConfig")) == 14
    assert {"checkCRCOnRecover", "osPageCacheBusyTimeOutMills", "brokerIP1", "aclEnable", "enableDLegerCommitLog",
            "rejectTransactionMessage", "useTLS", "writeBufferHighWaterMark"} <= set(broker)  # fmt: skip
    assert set(namesrv) >= {"orderMessageEnable", "configBlackList", "listenPort", "serverWorkerThreads"}


def test_pumice_reads_every_key_of_4_9_8_and_no_other_but_its_own() -> None:
    """The broker: BrokerConfig, NettyServerConfig, NettyClientConfig and MessageStoreConfig's
    keys (BrokerStartup reads all four from broker.conf); the name server: NamesrvConfig's and
    NettyServerConfig's (NamesrvStartup)."""
    broker = accepted_keys(BrokerConfig, MessageStoreConfig)
    assert set(java_keys(*BROKER_CLASSES)) - broker == set()
    assert broker - set(java_keys(*BROKER_CLASSES)) == PUMICE_BROKER_KEYS
    namesrv = accepted_keys(NamesrvConfig)
    assert set(java_keys(*NAMESRV_CLASSES)) - namesrv == set()
    assert namesrv - set(java_keys(*NAMESRV_CLASSES)) == PUMICE_NAMESRV_KEYS


def test_a_broker_conf_with_every_key_at_rocketmq_s_default_starts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Such as `mqbroker -p` prints (a key with no default is given empty, as `key=`)."""
    keys = java_keys(*BROKER_CLASSES)
    lines = [f"{k}={'' if v == 'null' else v}" for k, v in keys.items()]
    lines.append(f"storePathRootDir={tmp_path / 'store'}")
    with caplog.at_level(logging.WARNING, logger="pumice.config"):
        broker, store = load(tmp_path, "\n".join(lines) + "\n")
    assert not [r for r in caplog.records if r.levelno > logging.WARNING]
    # the Java spellings of what Pumice has set its fields
    assert store.check_crc_on_recover is True and store.os_page_cache_busy_timeout_mills == 1000
    assert broker.listen_port == 8888 and broker.region_id == "DefaultRegion" and broker.trace_on is True
    warned = ignored_keys_warned(caplog.text)
    # every ignored key is at RocketMQ's default: nothing asked for, nothing said (issue 31.5); the
    # CPU-dependent defaults are the table's for 2 CPUs
    if (os.cpu_count() or 1) == 2:
        assert "no effect in Pumice" not in caplog.text, caplog.text
    # ACL is built: its keys take effect
    assert not {"aclEnable", "rocketmqHome"} & warned and broker.acl_enable is False
    # and TLS's: the broker's own calls (useTLS), its ports (tlsMode)
    assert not {"useTLS", "tlsMode"} & warned and broker.use_tls is False
    # transactions are built: their keys take effect
    assert not {"rejectTransactionMessage", "transactionCheckMax", "transactionTimeOut"} & warned
    assert (broker.reject_transaction_message, broker.transaction_check_max) == (False, 15)
    assert (broker.transaction_time_out, broker.transaction_check_interval) == (6000, 60_000)
    assert broker.broker_fast_failure_enable is True and (
        broker.wait_time_mills_in_send_queue,
        broker.wait_time_mills_in_pull_queue,
        broker.wait_time_mills_in_heartbeat_queue,
    ) == (200, 5000, 31_000)
    # a key that sets a field is not warned about
    assert not warned & {"checkCRCOnRecover", "osPageCacheBusyTimeOutMills", "listenPort", "brokerRole"}


def test_a_namesrv_conf_with_every_key_at_rocketmq_s_default_starts(tmp_path: Path) -> None:
    keys = java_keys(*NAMESRV_CLASSES)
    props = {k: ("" if v == "null" else v.replace("${user.home}", str(tmp_path))) for k, v in keys.items()}
    config = NamesrvConfig()
    apply_properties([config], props, "namesrv.conf")
    config.validate()
    assert config.listen_port == 8888 and config.config_black_list == "configBlackList;configStorePath;kvConfigPath"
    assert config.kv_config_path == f"{tmp_path}/namesrv/kvConfig.json"


def test_the_java_spellings_of_pumice_s_features_set_them_and_are_printed(tmp_path: Path) -> None:
    """checkCRCOnRecover and osPageCacheBusyTimeOutMills were refused as unknown keys; -p and
    GET_BROKER_CONFIG now print RocketMQ's spelling, and Pumice's old one still loads."""
    broker, store = load(tmp_path, "checkCRCOnRecover=false\nosPageCacheBusyTimeOutMills=2500\n")
    assert store.check_crc_on_recover is False and store.os_page_cache_busy_timeout_mills == 2500
    text = to_properties(broker, store)
    assert "checkCRCOnRecover=false\n" in text and "osPageCacheBusyTimeOutMills=2500\n" in text
    assert "checkCrcOnRecover" not in text
    assert load(tmp_path, text) == (broker, store)
    _, old = load(tmp_path, "checkCrcOnRecover=false\nosPageCacheBusyTimeoutMills=7\n")
    assert old.check_crc_on_recover is False and old.os_page_cache_busy_timeout_mills == 7


def test_the_sql92_filter_keys_are_read_and_checked(tmp_path: Path) -> None:
    """The bloom-filter bit map's keys (issue 16) set the broker and store; a bloom filter 4.9
    could not build (an error rate outside 1..99) or an extension file too small for one unit is
    refused at start."""
    broker, store = load(
        tmp_path,
        "enableConsumeQueueExt=true\nmappedFileSizeConsumeQueueExt=4096\nenableCalcFilterBitMap=true\n"
        "filterSupportRetry=true\nexpectConsumerNumUseFilter=64\nmaxErrorRateOfBloomFilter=10\n"
        "filterDataCleanTimeSpan=60000\n",
    )
    assert (store.enable_consume_queue_ext, store.mapped_file_size_consume_queue_ext) == (True, 4096)
    assert (broker.enable_calc_filter_bit_map, broker.filter_support_retry) == (True, True)
    assert (broker.expect_consumer_num_use_filter, broker.max_error_rate_of_bloom_filter) == (64, 10)
    assert broker.filter_data_clean_time_span == 60_000
    with pytest.raises(ValueError, match="maxErrorRateOfBloomFilter 100 must be 1 to 99"):
        load(tmp_path, "maxErrorRateOfBloomFilter=100\n")
    with pytest.raises(ValueError, match="mappedFileSizeConsumeQueueExt 16 cannot hold one unit"):
        load(tmp_path, "enableConsumeQueueExt=true\nmappedFileSizeConsumeQueueExt=16\n")


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("endTransactionThreadPoolNums=8", "END_TRANSACTION runs in the send pool"),
        ("isEnableBatchPush=true", "write enableBatchPush"),
        ("clientWorkerThreads=8", "Netty client setting"),
        ("writeBufferHighWaterMark=65536", "4 MiB"),
    ],
)
def test_a_key_without_a_use_here_starts_with_a_warning_that_says_why(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, line: str, reason: str
) -> None:
    with caplog.at_level(logging.WARNING, logger="pumice.config"):
        load(tmp_path, line + "\n")
    key = line.split("=")[0]
    assert re.search(rf"{key}=\S* has no effect in Pumice: .*{re.escape(reason)}", caplog.text), caplog.text


@pytest.mark.parametrize(
    "line",
    ["enableDLegerCommitLog=false", "enableLmq=false", "messageStorePlugIn=", "clientWorkerThreads=4",
     "writeBufferHighWaterMark=0", "dLegerGroup=", "dLegerGroup=null", "commercialEnable=TRUE",
     "consumerFallbehindThreshold=17179869184"],
)  # fmt: skip
def test_a_key_at_rocketmq_s_default_says_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture, line: str) -> None:
    with caplog.at_level(logging.WARNING, logger="pumice.config"):
        load(tmp_path, line + "\n")
    assert "no effect" not in caplog.text, caplog.text


def test_a_cpu_dependent_default_is_computed_as_java_does(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with mock.patch("os.cpu_count", return_value=16), caplog.at_level(logging.WARNING, logger="pumice.config"):
        load(tmp_path, "sendMessageThreadPoolNums=4\nendTransactionThreadPoolNums=40\nheartbeatThreadPoolNums=16\n")
        assert "no effect" not in caplog.text, caplog.text
        load(tmp_path, "sendMessageThreadPoolNums=16\n")
    assert "sendMessageThreadPoolNums=16 has no effect in Pumice" in caplog.text


def test_the_ignored_keys_not_at_their_default_are_named_in_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Such as an old broker.conf with a few tuned Netty keys among RocketMQ's defaults."""
    text = "serverWorkerThreads=16\nserverSelectorThreads=3\nclientWorkerThreads=8\ncommercialEnable=false\n"
    with caplog.at_level(logging.WARNING, logger="pumice.config"):
        load(tmp_path, text)
    lines = [r.getMessage() for r in caplog.records if "no effect in Pumice" in r.getMessage()]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{tmp_path / 'broker.conf'}: 3 keys have no effect in Pumice: "), lines
    assert ignored_keys_warned(lines[0]) == {"serverWorkerThreads", "clientWorkerThreads", "commercialEnable"}
    # each with its reason, once for the keys that share it
    assert "commercialEnable=false (commercial statistics are not kept)" in lines[0]


def test_the_defaults_are_rocketmq_4_9_8_s() -> None:
    """pumice.ignored_key_defaults against the key table (read on 2 CPUs)."""
    ignored = {k for cls in (BrokerConfig, MessageStoreConfig, NamesrvConfig) for k in cls.IGNORED_KEYS}
    table = java_keys(*BROKER_CLASSES, "NamesrvConfig")
    with mock.patch("os.cpu_count", return_value=2):
        for key in sorted(ignored & set(table)):
            known, default = rocketmq_default(key)
            assert known and (default if default is not None else "null") == table[key], key


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("enableLmq=true", "enableLmq=true is not supported: light message queues (LMQ)"),
        ("enableMultiDispatch=true", "enableMultiDispatch=true is not supported"),
        ("readOnlyCommitLogStorePaths=/data/old", "readOnlyCommitLogStorePaths=/data/old is not supported"),
        ("messageStorePlugIn=com.example.Plugin", "messageStorePlugIn=com.example.Plugin is not supported"),
        ("filterServerNums=1", "filterServerNums=1 is not supported: filter servers"),
        ("disableConsumeIfConsumerReadSlowly=true", "disableConsumeIfConsumerReadSlowly=true is not supported"),
        ("startAcceptSendRequestTimeStamp=1700000000000", "startAcceptSendRequestTimeStamp=1700000000000 is not sup"),
        ("fetchNamesrvAddrByAddressServer=true", "there is no address server"),
        (
            "storePathCommitLog=/data/a,/data/b",
            "storePathCommitLog=/data/a,/data/b is not supported: a CommitLog spread over several directories",
        ),
        ("kvConfigPath=/tmp/kv.json", "unknown key 'kvConfigPath'"),  # a name server key
        ("notARocketMQKey=1", "unknown key 'notARocketMQKey'"),
        ("checkCRCOnRecover=maybe", "bad value for checkCRCOnRecover: 'maybe'"),
    ],
)
def test_a_key_asking_for_a_feature_pumice_lacks_is_refused_by_name(tmp_path: Path, line: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load(tmp_path, f"brokerName=broker-a\n{line}\n")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("clusterTest=true", "clusterTest=true is not supported: test-cluster routing"),
        ("useTLS=true", "useTLS=true is not supported"),
        ("brokerName=broker-a", "unknown key 'brokerName'"),
        ("notARocketMQKey=1", "unknown key 'notARocketMQKey'"),
    ],
)
def test_a_namesrv_key_asking_for_a_feature_pumice_lacks_is_refused_by_name(line: str, message: str) -> None:
    key, _, value = line.partition("=")
    with pytest.raises(ConfigError, match=re.escape(message)):
        apply_properties([NamesrvConfig()], {key: value}, "namesrv.conf")


def sample_files() -> list[Path]:
    return sorted(p for p in SAMPLES.rglob("*") if p.suffix in (".conf", ".properties"))


def test_the_samples_are_the_distribution_s_with_their_license() -> None:
    names = {str(p.relative_to(SAMPLES)) for p in sample_files()}
    assert names == {
        "broker.conf",
        *(f"2m-2s-{m}/broker-{b}{s}.properties" for m in ("async", "sync") for b in "ab" for s in ("", "-s")),
        "2m-noslave/broker-a.properties", "2m-noslave/broker-b.properties", "2m-noslave/broker-trace.properties",
        "dledger/broker-n0.conf", "dledger/broker-n1.conf", "dledger/broker-n2.conf",
    }  # fmt: skip
    for p in sample_files():
        assert "Licensed to the Apache Software Foundation (ASF)" in p.read_text(encoding="utf-8"), p


@pytest.mark.parametrize("sample", [p for p in sample_files() if p.parent.name != "dledger"], ids=lambda p: p.name)
def test_each_sample_loads_as_rocketmq_reads_it(sample: Path) -> None:
    broker, store = load_broker_config(str(sample))
    assert broker.broker_cluster_name == "DefaultCluster"
    assert broker.broker_name == ("broker-a" if sample.name == "broker.conf" else sample.stem.removesuffix("-s"))
    slave = sample.name.endswith("-s.properties")
    assert (broker.broker_id, store.broker_role is BrokerRole.SLAVE) == ((1, True) if slave else (0, False))
    if not slave:
        want = BrokerRole.SYNC_MASTER if sample.parent.name == "2m-2s-sync" else BrokerRole.ASYNC_MASTER
        assert store.broker_role is want
    assert (store.file_reserved_time, store.delete_when, store.flush_disk_type) == (48, "04", FlushDiskType.ASYNC_FLUSH)


@pytest.mark.parametrize("sample", sorted((SAMPLES / "dledger").glob("*.conf")), ids=lambda p: p.name)
def test_the_dledger_samples_load_as_4_9_reads_them(sample: Path) -> None:
    broker, store = load_broker_config(str(sample))
    assert store.enable_d_leger_commit_log and store.d_leger_group == broker.broker_name == "RaftNode00"
    assert store.d_leger_self_id == f"n{store.dledger_node_number}" and len(store.dledger_peer_map) == 3
    assert broker.broker_id == -1


def test_an_old_spelling_rocketmq_ignores_is_read_with_a_warning(tmp_path: Path, caplog) -> None:
    """mapedFileSizeCommitLog sets the size here, but 4.9's broker ignores that spelling (found
    running it on the same store: it wrote 1 GiB files): the warning names the one it reads."""
    with caplog.at_level(logging.WARNING, logger="pumice.config"):
        _, store = load(tmp_path, "mapedFileSizeCommitLog=1048576\nmappedFileSizeConsumeQueue=6000\n")
    assert (store.mapped_file_size_commit_log, store.mapped_file_size_consume_queue) == (1048576, 6000)
    assert "mapedFileSizeCommitLog is an old spelling that RocketMQ 4.9 ignores" in caplog.text
    assert "write mappedFileSizeCommitLog" in caplog.text and "mappedFileSizeConsumeQueue is" not in caplog.text


def test_a_bit_map_length_the_bloom_filter_replaces_is_named(tmp_path: Path, caplog) -> None:
    """bitMapLengthConsumeQueueExt is the bloom filter's m in 4.9 whatever the file says: said, not dropped quietly."""
    from pumice.broker.broker_controller import BrokerController

    broker, store = load(tmp_path, f"storePathRootDir={tmp_path / 'store'}\nbitMapLengthConsumeQueueExt=100\n")
    with caplog.at_level(logging.WARNING, logger="pumice.broker.broker_controller"):
        BrokerController(broker, store)
    assert store.bit_map_length_consume_queue_ext == 112
    assert "bitMapLengthConsumeQueueExt=100 is replaced by the bloom filter's 112 bits" in caplog.text
