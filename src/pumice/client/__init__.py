"""pumice.client: a native Python RocketMQ 4.x client (remoting protocol).

Async classes (coroutines on the caller's loop) and blocking twins (a private loop in a
background thread):

=========================  =====================  ==============================================
async                      blocking               what
=========================  =====================  ==============================================
``AsyncProducer``          ``Producer``           send: sync, async, oneway, batch, ordered
``AsyncPullConsumer``      ``PullConsumer``       pull by queue and offset; group offsets
``AsyncLitePullConsumer``  ``LitePullConsumer``   assign/subscribe, poll, seek, commit
``AsyncPushConsumer``      ``PushConsumer``       handlers called with pulled messages: clustering
                                                  or broadcasting, concurrent or orderly, retries
``AsyncMQAdmin``           ``MQAdmin``            topics, clusters, consumer progress, queries
=========================  =====================  ==============================================

Lower layers, for the push consumer and tools: ``MQClientInstance`` (routes, heartbeats,
server requests) and ``MQClientAPIImpl`` (one method per request code). The push consumer's
parts, as Java's DefaultMQPushConsumerImpl splits them: ``rebalance.Rebalance`` (the
process-queue table, allocation, where a queue starts, broker locks), ``consume_service``
(concurrent and orderly consumption, send-back), ``process_queue.ProcessQueue`` (in-flight
offsets), ``offset_store`` (broker or local file offsets) and ``allocate`` (queue allocation
strategies); ``push_consumer`` keeps the facade and the pull loop.
"""

from pumice.client.admin import AsyncMQAdmin, MQAdmin
from pumice.client.allocate import (
    AllocateStrategy,
    allocate_message_queue_averagely,
    allocate_message_queue_averagely_by_circle,
)
from pumice.client.client_instance import MQClientInstance, consumer_data
from pumice.client.exceptions import (
    MQBrokerError,
    MQClientError,
    RemotingConnectError,
    RemotingError,
    RemotingTimeoutError,
    RequestTimeoutError,
)
from pumice.client.message import (
    Message,
    MessageExt,
    MessageQueue,
    PullResult,
    PullStatus,
    SendResult,
    SendStatus,
)
from pumice.client.mq_client_api import MQClientAPIImpl
from pumice.client.offset_store import LocalFileOffsetStore, RemoteBrokerOffsetStore
from pumice.client.producer import AsyncProducer, Producer
from pumice.client.pull_consumer import (
    AsyncLitePullConsumer,
    AsyncPullConsumer,
    ConsumeFromWhere,
    LitePullConsumer,
    PullConsumer,
)
from pumice.client.push_consumer import (
    AsyncPushConsumer,
    ConsumeContext,
    ConsumeStatus,
    MessageModel,
    PushConsumer,
)
from pumice.client.queue_selector import by_arg_hash, by_random, select_by_hash
from pumice.client.request_reply import create_reply_message
from pumice.client.subscription import MessageSelector
from pumice.client.transaction_producer import (
    AsyncTransactionProducer,
    LocalTransactionState,
    TransactionListener,
    TransactionProducer,
    TransactionSendResult,
)

__all__ = [
    "AllocateStrategy",
    "AsyncLitePullConsumer",
    "AsyncMQAdmin",
    "AsyncProducer",
    "AsyncPullConsumer",
    "AsyncPushConsumer",
    "AsyncTransactionProducer",
    "ConsumeContext",
    "ConsumeFromWhere",
    "ConsumeStatus",
    "LitePullConsumer",
    "LocalFileOffsetStore",
    "LocalTransactionState",
    "MQAdmin",
    "MQBrokerError",
    "MQClientAPIImpl",
    "MQClientError",
    "MQClientInstance",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MessageSelector",
    "Producer",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "PushConsumer",
    "RemoteBrokerOffsetStore",
    "RemotingConnectError",
    "RemotingError",
    "RemotingTimeoutError",
    "RequestTimeoutError",
    "SendResult",
    "SendStatus",
    "TransactionListener",
    "TransactionProducer",
    "TransactionSendResult",
    "allocate_message_queue_averagely",
    "allocate_message_queue_averagely_by_circle",
    "by_arg_hash",
    "by_random",
    "consumer_data",
    "create_reply_message",
    "select_by_hash",
]
