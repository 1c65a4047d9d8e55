"""Every option mqadmin 4.9.8 has, against `pumice admin` (issue 31, point 10).

``MQADMIN_4_9_8`` lists each SubCommand's ``buildCommandlineOptions`` of rocketmq-tools 4.9.8
(command, short name, long name as mqadmin spells it, takes a value), in mqadmin's order;
tests/interop/test_mqadmin_parity.py checks it against the jar itself (MqadminOptions.java).
mqadmin's own -n and -h come from MQAdminStartup, not the SubCommands.

Each option must parse under its short and its long name (a long name with a trailing space,
such as printMsg's ``"beginTimestamp "``, under its stripped form, the only one a shell user can
type unquoted), taking a value exactly when mqadmin's does; or, for those in ``REFUSED``, be
refused by name (a usage error, exit 2, that names the option and says why).
"""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from pumice.tools.admin_cli import admin
from pumice.tools.sub_command import Timestamp, check_addrs

# (command, short, long, hasArg), from MqadminOptions.java against rocketmq-tools-4.9.8.jar
MQADMIN_4_9_8: list[tuple[str, str, str, bool]] = [
    ("updateTopic", "p", "perm", True),
    ("updateTopic", "b", "brokerAddr", True),
    ("updateTopic", "r", "readQueueNums", True),
    ("updateTopic", "c", "clusterName", True),
    ("updateTopic", "s", "hasUnitSub", True),
    ("updateTopic", "t", "topic", True),
    ("updateTopic", "u", "unit", True),
    ("updateTopic", "w", "writeQueueNums", True),
    ("updateTopic", "o", "order", True),
    ("deleteTopic", "c", "clusterName", True),
    ("deleteTopic", "t", "topic", True),
    ("updateSubGroup", "q", "retryQueueNums", True),
    ("updateSubGroup", "a", "notifyConsumerIdsChanged", True),
    ("updateSubGroup", "b", "brokerAddr", True),
    ("updateSubGroup", "r", "retryMaxTimes", True),
    ("updateSubGroup", "c", "clusterName", True),
    ("updateSubGroup", "s", "consumeEnable", True),
    ("updateSubGroup", "d", "consumeBroadcastEnable", True),
    ("updateSubGroup", "g", "groupName", True),
    ("updateSubGroup", "w", "whichBrokerWhenConsumeSlowly", True),
    ("updateSubGroup", "i", "brokerId", True),
    ("updateSubGroup", "m", "consumeFromMinEnable", True),
    ("deleteSubGroup", "b", "brokerAddr", True),
    ("deleteSubGroup", "r", "removeOffset", True),
    ("deleteSubGroup", "c", "clusterName", True),
    ("deleteSubGroup", "g", "groupName", True),
    ("updateBrokerConfig", "b", "brokerAddr", True),
    ("updateBrokerConfig", "c", "clusterName", True),
    ("updateBrokerConfig", "v", "value", True),
    ("updateBrokerConfig", "k", "key", True),
    ("updateTopicPerm", "p", "perm", True),
    ("updateTopicPerm", "b", "brokerAddr", True),
    ("updateTopicPerm", "c", "clusterName", True),
    ("updateTopicPerm", "t", "topic", True),
    ("topicRoute", "t", "topic", True),
    ("topicRoute", "l", "list", False),
    ("topicStatus", "t", "topic", True),
    ("topicClusterList", "t", "topic", True),
    ("brokerStatus", "b", "brokerAddr", True),
    ("brokerStatus", "c", "clusterName", True),
    ("queryMsgById", "s", "sendMessage", True),
    ("queryMsgById", "d", "clientId", True),
    ("queryMsgById", "u", "unitName", True),
    ("queryMsgById", "g", "consumerGroup", True),
    ("queryMsgById", "i", "msgId", True),
    ("queryMsgByKey", "t", "topic", True),
    ("queryMsgByKey", "k", "msgKey", True),
    ("queryMsgByUniqueKey", "a", "showAll", False),
    ("queryMsgByUniqueKey", "d", "clientId", True),
    ("queryMsgByUniqueKey", "t", "topic", True),
    ("queryMsgByUniqueKey", "g", "consumerGroup", True),
    ("queryMsgByUniqueKey", "i", "msgId", True),
    ("queryMsgByOffset", "b", "brokerName", True),
    ("queryMsgByOffset", "t", "topic", True),
    ("queryMsgByOffset", "i", "queueId", True),
    ("queryMsgByOffset", "o", "offset", True),
    ("queryMsgTraceById", "t", "traceTopic", True),
    ("queryMsgTraceById", "i", "msgId", True),
    ("printMsg", "b", "beginTimestamp ", True),
    ("printMsg", "c", "charsetName ", True),
    ("printMsg", "s", "subExpression ", True),
    ("printMsg", "t", "topic", True),
    ("printMsg", "d", "printBody ", True),
    ("printMsg", "e", "endTimestamp ", True),
    ("printMsgByQueue", "p", "print msg", True),
    ("printMsgByQueue", "a", "brokerName ", True),
    ("printMsgByQueue", "b", "beginTimestamp ", True),
    ("printMsgByQueue", "c", "charsetName ", True),
    ("printMsgByQueue", "s", "subExpression ", True),
    ("printMsgByQueue", "t", "topic", True),
    ("printMsgByQueue", "d", "printBody ", True),
    ("printMsgByQueue", "e", "endTimestamp ", True),
    ("printMsgByQueue", "f", "calculate", True),
    ("printMsgByQueue", "i", "queueId ", True),
    ("sendMsgStatus", "b", "brokerName", True),
    ("sendMsgStatus", "s", "messageSize", True),
    ("sendMsgStatus", "c", "count", True),
    ("brokerConsumeStats", "b", "brokerAddr", True),
    ("brokerConsumeStats", "t", "timeoutMillis", True),
    ("brokerConsumeStats", "l", "level", True),
    ("brokerConsumeStats", "o", "order", True),
    ("producerConnection", "t", "topic", True),
    ("producerConnection", "g", "producerGroup", True),
    ("consumerConnection", "b", "brokerAddr", True),
    ("consumerConnection", "g", "consumerGroup", True),
    ("consumerProgress", "s", "showClientIP", True),
    ("consumerProgress", "g", "groupName", True),
    ("consumerStatus", "b", "brokerAddr", True),
    ("consumerStatus", "s", "jstack", False),
    ("consumerStatus", "g", "consumerGroup", True),
    ("consumerStatus", "i", "clientId", True),
    ("cloneGroupOffset", "s", "srcGroup", True),
    ("cloneGroupOffset", "d", "destGroup", True),
    ("cloneGroupOffset", "t", "topic", True),
    ("cloneGroupOffset", "o", "offline", True),
    ("producer", "b", "broker", True),
    ("clusterList", "i", "interval", True),
    ("clusterList", "m", "moreStats", False),
    ("topicList", "c", "clusterModel", False),
    ("updateKvConfig", "s", "namespace", True),
    ("updateKvConfig", "v", "value", True),
    ("updateKvConfig", "k", "key", True),
    ("deleteKvConfig", "s", "namespace", True),
    ("deleteKvConfig", "k", "key", True),
    ("wipeWritePerm", "b", "brokerName", True),
    ("addWritePerm", "b", "brokerName", True),
    ("resetOffsetByTime", "s", "timestamp", True),
    ("resetOffsetByTime", "c", "cplus", False),
    ("resetOffsetByTime", "t", "topic", True),
    ("resetOffsetByTime", "f", "force", True),
    ("resetOffsetByTime", "g", "group", True),
    ("skipAccumulatedMessage", "t", "topic", True),
    ("skipAccumulatedMessage", "f", "force", True),
    ("skipAccumulatedMessage", "g", "group", True),
    ("updateOrderConf", "t", "topic", True),
    ("updateOrderConf", "v", "orderConf", True),
    ("updateOrderConf", "m", "method", True),
    ("cleanExpiredCQ", "b", "brokerAddr", True),
    ("cleanExpiredCQ", "c", "cluster", True),
    ("deleteExpiredCommitLog", "b", "brokerAddr", True),
    ("deleteExpiredCommitLog", "c", "cluster", True),
    ("deleteExpiredCommitLog", "n", "namesrvAddr", True),
    ("cleanUnusedTopic", "b", "brokerAddr", True),
    ("cleanUnusedTopic", "c", "cluster", True),
    ("statsAll", "a", "activeTopic", False),
    ("statsAll", "t", "topic", True),
    ("allocateMQ", "t", "topic", True),
    ("allocateMQ", "i", "ipList", True),
    ("checkMsgSendRT", "a", "amount", True),
    ("checkMsgSendRT", "s", "size", True),
    ("checkMsgSendRT", "t", "topic", True),
    ("clusterRT", "p", "print log", True),
    ("clusterRT", "a", "amount", True),
    ("clusterRT", "s", "size", True),
    ("clusterRT", "c", "cluster", True),
    ("clusterRT", "i", "interval", True),
    ("clusterRT", "m", "machine room", True),
    ("updateNamesrvConfig", "v", "value", True),
    ("updateNamesrvConfig", "k", "key", True),
    ("getBrokerConfig", "b", "brokerAddr", True),
    ("getBrokerConfig", "c", "clusterName", True),
    ("getConsumerConfig", "g", "groupName", True),
    ("queryCq", "q", "queue", True),
    ("queryCq", "b", "broker", True),
    ("queryCq", "c", "count", True),
    ("queryCq", "t", "topic", True),
    ("queryCq", "g", "consumer", True),
    ("queryCq", "i", "index", True),
    ("sendMessage", "p", "body", True),
    ("sendMessage", "b", "broker", True),
    ("sendMessage", "c", "tags", True),
    ("sendMessage", "t", "topic", True),
    ("sendMessage", "i", "qid", True),
    ("sendMessage", "k", "key", True),
    ("sendMessage", "m", "msgTraceEnable", True),
    ("consumeMessage", "b", "brokerName", True),
    ("consumeMessage", "s", "beginTimestamp ", True),
    ("consumeMessage", "c", "MessageNumber", True),
    ("consumeMessage", "t", "topic", True),
    ("consumeMessage", "e", "endTimestamp ", True),
    ("consumeMessage", "g", "consumerGroup", True),
    ("consumeMessage", "i", "queueId", True),
    ("consumeMessage", "o", "offset", True),
    ("updateAclConfig", "a", "accessKey", True),
    ("updateAclConfig", "b", "brokerAddr", True),
    ("updateAclConfig", "c", "clusterName", True),
    ("updateAclConfig", "s", "secretKey", True),
    ("updateAclConfig", "t", "topicPerms", True),
    ("updateAclConfig", "u", "defaultGroupPerm", True),
    ("updateAclConfig", "w", "whiteRemoteAddress", True),
    ("updateAclConfig", "g", "groupPerms", True),
    ("updateAclConfig", "i", "defaultTopicPerm", True),
    ("updateAclConfig", "m", "admin", True),
    ("deleteAclConfig", "a", "accessKey", True),
    ("deleteAclConfig", "b", "brokerAddr", True),
    ("deleteAclConfig", "c", "clusterName", True),
    ("clusterAclConfigVersion", "b", "brokerAddr", True),
    ("clusterAclConfigVersion", "c", "clusterName", True),
    ("updateGlobalWhiteAddr", "p", "aclFileFullPath", True),
    ("updateGlobalWhiteAddr", "b", "brokerAddr", True),
    ("updateGlobalWhiteAddr", "c", "clusterName", True),
    ("updateGlobalWhiteAddr", "g", "globalWhiteRemoteAddresses", True),
    ("exportMetadata", "b", "brokerAddr", True),
    ("exportMetadata", "c", "clusterName", True),
    ("exportMetadata", "s", "specialTopic", False),
    ("exportMetadata", "t", "topic", False),
    ("exportMetadata", "f", "filePath", True),
    ("exportMetadata", "g", "subscriptionGroup", False),
    ("exportConfigs", "c", "clusterName", True),
    ("exportConfigs", "f", "filePath", True),
    ("exportMetrics", "c", "clusterName", True),
    ("exportMetrics", "f", "filePath", True),
]

# options Pumice refuses by name: (command, short) -> words of the reason it gives
REFUSED: dict[tuple[str, str], str] = {
    ("queryMsgById", "s"): "resend",
    ("queryMsgById", "u"): "unit",
    ("sendMessage", "m"): "trace",
}
# a value the refused option is given to be refused
REFUSED_VALUE = {("queryMsgById", "s"): "true", ("queryMsgById", "u"): "u1", ("sendMessage", "m"): "true"}


def sample(param: click.Parameter) -> str:
    """A value the parameter takes."""
    t = param.type
    if param.callback is check_addrs:
        return "127.0.0.1:9876"
    if isinstance(t, Timestamp):
        return "0"
    if t is click.BOOL:
        return "false"
    if isinstance(t, click.IntRange | click.FloatRange):
        return str(t.min if t.min is not None else 0)
    if isinstance(t, click.Choice):
        return str(t.choices[0])
    if t is click.INT or t is click.FLOAT:
        return "1"
    return "x"


def required_args(cmd: click.Command, but: click.Parameter | None) -> list[str]:
    args: list[str] = []
    for p in cmd.params:
        if isinstance(p, click.Option) and p.required and p is not but:
            args += [p.opts[0], sample(p)]
    return args


def find(cmd: click.Command, name: str) -> click.Option | None:
    return next((p for p in cmd.params if isinstance(p, click.Option) and name in p.opts), None)


def long_name(long: str) -> str:
    return "--" + (long.strip() if long.strip() != long else long)


@pytest.mark.parametrize(("command", "short", "long", "has_arg"), MQADMIN_4_9_8,
                         ids=[f"{c}-{s}" for c, s, _, _ in MQADMIN_4_9_8])  # fmt: skip
def test_mqadmin_option_accepted_or_refused_by_name(command: str, short: str, long: str, has_arg: bool) -> None:
    cmd = admin.commands.get(command)
    assert cmd is not None, f"pumice admin has no {command}"
    for name in (f"-{short}", long_name(long)):
        p = find(cmd, name)
        assert p is not None, f"pumice admin {command} does not take mqadmin's {name}"
        assert p.is_flag != has_arg, f"{command} {name}: mqadmin's takes a value: {has_arg}"
        if (command, short) in REFUSED:
            value = REFUSED_VALUE[(command, short)]
            with pytest.raises(click.UsageError) as err:
                cmd.make_context(command, [*required_args(cmd, p), name, value])
            text = err.value.format_message()
            assert name in text and REFUSED[(command, short)] in text, text
            continue
        argv = [*required_args(cmd, p), name, *([sample(p)] if has_arg else [])]
        ctx = cmd.make_context(command, argv)  # raises a UsageError if it is not taken
        assert ctx.params[p.name or ""] is not None, (command, name)


def test_help_option() -> None:
    """mqadmin's -h (MQAdminStartup's own option) prints a command's options."""
    argv = [sys.executable, "-m", "pumice.cli", "admin", "updateTopic", "-h"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "--hasUnitSub" in r.stdout and "--unit" in r.stdout, r.stdout + r.stderr
