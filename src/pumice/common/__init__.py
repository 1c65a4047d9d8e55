"""What the store, broker, name server, client and Spark share (RocketMQ's ``common`` module).

==================  ===============================================================
module              holds
==================  ===============================================================
message_decoder     the CommitLog record layout and codec, properties, msgId
message             the message classes the store writes and reads back
message_const       property names (``MessageConst``)
message_sys_flag    SYSFLAG bits (``MessageSysFlag``)
java_hash           Java's ``String.hashCode`` and what RocketMQ derives from it
perm_name           permission bits (``PermName``)
mix_all             system topic and group names, retry/DLQ topic rules
route_data          the name server's route JSON (``TopicRouteData``, ``QueueData``, ``BrokerData``)
subscription_group  a consumer group's settings (``SubscriptionGroupConfig``)
atomic_file         the atomic replace of a small file, with ``.bak``
==================  ===============================================================

Nothing here imports the store, the broker, the client or numpy at import time.
"""
