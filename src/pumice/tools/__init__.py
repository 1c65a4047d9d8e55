"""RocketMQ's ``tools`` module: ``pumice admin``, mqadmin's commands with mqadmin's names and flags.

The commands are grouped as mqadmin's SubCommand packages (``org.apache.rocketmq.tools.command.*``):

=====================  ===================================================================
module                 holds
=====================  ===================================================================
admin_cli              the ``admin`` click group (``pumice admin``), which registers the commands below
topic_commands         updateTopic, deleteTopic, topicList, topicRoute, topicStatus, updateTopicPerm,
                       topicClusterList, updateOrderConf, allocateMQ (``topic``)
broker_commands        clusterList, clusterRT, brokerStatus, dLedgerStatus, deleteExpiredCommitLog,
                       cleanExpiredCQ, cleanUnusedTopic, getBrokerConfig, updateBrokerConfig, brokerConsumeStats,
                       sendMsgStatus (``cluster``, ``broker``)
consumer_commands      consumerProgress, updateSubGroup, deleteSubGroup, getConsumerConfig,
                       resetOffsetByTime, skipAccumulatedMessage, cloneGroupOffset, consumerStatus,
                       consumer, startMonitoring (``consumer``, ``offset``, ``monitor``)
connection_commands    consumerConnection, producerConnection (``connection``)
producer_commands      producer (``producer``)
message_commands       queryMsgById, queryMsgByKey, queryMsgByUniqueKey, queryMsgByOffset,
                       queryMsgTraceById, printMsg, printMsgByQueue, sendMessage, checkMsgSendRT,
                       consumeMessage (``message``)
queue_commands         queryCq (``queue``)
namesrv_commands       wipeWritePerm, addWritePerm, getNamesrvConfig, updateNamesrvConfig,
                       updateKvConfig, deleteKvConfig (``namesrv``)
stats_commands         statsAll (``stats``)
export_commands        exportMetadata, exportConfigs, exportMetrics (``export``)
acl_commands           updateAclConfig, deleteAclConfig, updateGlobalWhiteAddr,
                       clusterAclConfigVersion (``acl``)
sub_command            what every command shares: -n/--json/--debug, running on an AsyncMQAdmin
                       with one-line errors, the timestamp type, argument checks
admin_output           rich tables, mqadmin's message printout, the ``--json`` documents
=====================  ===================================================================

It reaches the cluster through ``pumice.client`` (``AsyncMQAdmin`` and the clients) and takes
RocketMQ's names from ``pumice.common``; it imports neither the store nor the broker.
"""
