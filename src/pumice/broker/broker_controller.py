"""BrokerController: builds the broker's parts, starts them in order and stops them in order.

Start (the seeds' order): load the managers (topics.json, consumerOffset.json,
subscriptionGroup.json) and the store (recovery), start the store and its services, the
remoting servers (``listenPort``, and the fast port ``listenPort - 2`` for everything but
pulls), long polling, then register with every name server, again 10 s later (4.9's schedule),
then every ``registerNameServerPeriod`` (clamped 10–60 s) and whenever a topic is created. Consumer
offsets are persisted every ``flushConsumerOffsetInterval`` (5 s). A config file whose save
failed (topics.json, subscriptionGroup.json, consumerOffset.json, consumerFilter.json) is saved
again, checked every second, with its own back-off (ConfigFile.retry_persist). Topics that
have ConsumeQueues but no config (a topics.json that lost them) are named in a WARN at start.

Master/slave: the store's HAService listens on ``listenPort + 1`` on every broker. A slave
(brokerRole SLAVE, brokerId > 0) learns the master's HA address and remoting address from
the name server's answer to each registration (unless ``haMasterAddress`` is set), and
runs SlaveSynchronize. A master logs how far its slaves are behind every minute.

Shutdown: unregister from the name servers, close the servers, stop long polling, persist
the managers, shut the store down (which removes the ``abort`` file).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import Any

import orjson

from pumice.acl.permission import AclError
from pumice.acl.plain_access_validator import PlainAccessValidator
from pumice.acl.plain_permission_manager import PlainPermissionManager, signing_credentials, start_manager
from pumice.acl.remote_address_strategy import remote_address_strategy
from pumice.broker.admin_broker_processor import AdminBrokerProcessor
from pumice.broker.bloom_filter import BloomFilter
from pumice.broker.broker_config import BrokerConfig, apply_role
from pumice.broker.broker_fast_failure import BrokerFastFailure
from pumice.broker.broker_stats_manager import SAMPLING_INTERVAL_S, BrokerStatsManager
from pumice.broker.client_manage_processor import ClientManageProcessor
from pumice.broker.consumer_filter_manager import ConsumerFilterManager
from pumice.broker.consumer_manage_processor import ConsumerManageProcessor
from pumice.broker.consumer_manager import ConsumerManager
from pumice.broker.consumer_offset_manager import ConsumerOffsetManager
from pumice.broker.dledger_role_change_handler import DLedgerRoleChangeHandler
from pumice.broker.pop_consumption import PopConsumption
from pumice.broker.producer_manager import ProducerManager
from pumice.broker.pull_message_processor import PullMessageProcessor
from pumice.broker.query_message_processor import QueryMessageProcessor
from pumice.broker.recall_message_processor import RecallMessageProcessor
from pumice.broker.send_message_processor import SendMessageProcessor
from pumice.broker.slave_synchronize import SlaveSynchronize
from pumice.broker.subscription_group_manager import SubscriptionGroupManager
from pumice.broker.timer_message_hook import TimerMessageHook
from pumice.broker.topic_config_manager import TOPIC_SYS_FLAG_UNIT_SUB, TopicConfig, TopicConfigManager
from pumice.broker.transactional_message_service import (
    TransactionalMessageCheckService,
    TransactionalMessageService,
)
from pumice.common.message import MessageExt, host_address
from pumice.common.message_const import MessageConst
from pumice.common.message_decoder import encode_record
from pumice.common.mix_all import RETRY_GROUP_TOPIC_PREFIX
from pumice.common.perm_name import PERM_READ, PERM_WRITE
from pumice.common.subscription_group import SubscriptionGroupConfig
from pumice.metrics.broker_metrics import BrokerMetrics, serve_broker_metrics
from pumice.remoting.remoting_client import RemotingClient
from pumice.remoting.remoting_command import RPC_ONEWAY, RemotingCommand
from pumice.remoting.remoting_exceptions import RemotingConnectError, RemotingTimeoutError
from pumice.remoting.remoting_server import PartialFrameBudget, ProcessorPool, RemotingServer, RequestProcessor
from pumice.remoting.request_code import RequestCode, broker_not_supported_hint
from pumice.remoting.response_code import ResponseCode
from pumice.remoting.tls import TlsContextHolder, client_context, start_tls
from pumice.store.dledger_commit_log import ReplicatedLog
from pumice.store.ha_auth import HAAccount, HAAuthenticator
from pumice.store.message_store import DefaultMessageStore
from pumice.store.message_store_config import BrokerRole, MessageStoreConfig
from pumice.store.schedule_message_service import ScheduleMessageService
from pumice.store.timer.timer_message_store import TimerMessageStore

log = logging.getLogger(__name__)

SLAVE_SEEK_MASTER_S = 2.0  # how often a slave with no master registers again
FIRST_REREGISTER_S = 10.0  # 4.9's initial delay of its registration schedule


def build_dledger_server(broker: BrokerConfig, store: MessageStoreConfig) -> ReplicatedLog:
    """DLedger mode's Raft node (pumice.dledger) from the broker's keys; its peers' port on listenHost."""
    from pumice.broker.dledger_replicated_log import DLedgerReplicatedLog

    return DLedgerReplicatedLog.from_store_config(store, broker.listen_host)


class BrokerController:
    def __init__(
        self, broker_config: BrokerConfig, store_config: MessageStoreConfig, replicated_log: ReplicatedLog | None = None
    ) -> None:
        """``replicated_log``: DLedger mode's log (``enableDLegerCommitLog``); built here from
        the config when not given."""
        apply_role(broker_config, store_config)
        self.config = broker_config
        self.store_config = store_config
        cfg_dir = store_config.config_dir
        self.topics = TopicConfigManager(
            os.path.join(cfg_dir, "topics.json"),
            broker_config.broker_name,
            broker_config.broker_cluster_name,
            broker_config.default_topic_queue_nums,
            broker_config.auto_create_topic_enable,
            cluster_topic_enable=broker_config.cluster_topic_enable,
            broker_topic_enable=broker_config.broker_topic_enable,
            trace_topic_enable=broker_config.trace_topic_enable,
            msg_trace_topic_name=broker_config.msg_trace_topic_name,
            on_topic_created=self._on_topic_created,
            timer_wheel_enable=store_config.timer_wheel_enable,
        )
        self.offsets = ConsumerOffsetManager(os.path.join(cfg_dir, "consumerOffset.json"))
        self.subscription_groups = SubscriptionGroupManager(
            os.path.join(cfg_dir, "subscriptionGroup.json"), broker_config.auto_create_subscription_group
        )
        self.consumers = ConsumerManager(broker_config.notify_consumer_ids_changed_enable)
        bloom = BloomFilter(broker_config.max_error_rate_of_bloom_filter, broker_config.expect_consumer_num_use_filter)
        if store_config.bit_map_length_consume_queue_ext not in (MessageStoreConfig.bit_map_length_consume_queue_ext,
                                                                 bloom.m):  # fmt: skip
            log.warning("bitMapLengthConsumeQueueExt=%d is replaced by the bloom filter's %d bits, as 4.9 replaces "
                        "it (set maxErrorRateOfBloomFilter and expectConsumerNumUseFilter instead)",
                        store_config.bit_map_length_consume_queue_ext, bloom.m)  # fmt: skip
        store_config.bit_map_length_consume_queue_ext = bloom.m  # as 4.9's ConsumerFilterManager sets it
        store_config.validate()
        self.consumer_filters = ConsumerFilterManager(
            os.path.join(cfg_dir, "consumerFilter.json"), bloom, broker_config.filter_data_clean_time_span
        )
        self.consumers.on_register = self.consumer_filters.register_group
        self.consumers.on_unregister = self.consumer_filters.unregister
        self.producers = ProducerManager()
        self.dledger = store_config.enable_d_leger_commit_log
        if self.dledger and replicated_log is None:
            replicated_log = build_dledger_server(broker_config, store_config)
        self.replicated_log = replicated_log
        self.role_change_handler: DLedgerRoleChangeHandler | None = None
        self.store = DefaultMessageStore(
            store_config, ha_listen_host=broker_config.listen_host, replicated_log=replicated_log
        )
        self._set_calc_bit_map()
        self.slave_synchronize: SlaveSynchronize | None = None
        self._own_tls = client_context(verify=False) if broker_config.use_tls else None
        # useTLS: the broker's own calls over TLS, any certificate trusted (4.9's client default)
        own_tls = self._own_tls
        if self.store.ha_service is not None:
            self.store.ha_service.ha_client.ssl_context = own_tls
        if not self.store.is_master() and not self.dledger:  # DLedger: the first role change decides
            self.slave_synchronize = self._new_slave_synchronize()
        max_frame = broker_config.server_max_frame_length
        max_idle_s = float(broker_config.server_channel_max_idle_time_seconds)
        partial_frames = PartialFrameBudget(broker_config.server_max_partial_frame_bytes)  # both ports share it
        self.server = RemotingServer(
            broker_config.listen_host, broker_config.listen_port, name="Broker", max_frame_length=max_frame,
            max_idle_s=max_idle_s, partial_frames=partial_frames,
        )  # fmt: skip
        self.fast_server: RemotingServer | None = None
        if broker_config.fast_listen_port_enable and broker_config.listen_port > 2:
            self.fast_server = RemotingServer(
                broker_config.listen_host, broker_config.listen_port - 2, name="BrokerVIP", max_frame_length=max_frame,
                max_idle_s=max_idle_s, partial_frames=partial_frames,
            )  # fmt: skip
        for server in (self.server, self.fast_server):
            if server is not None:
                server.not_supported_hint = broker_not_supported_hint
        self.namesrv_client = RemotingClient(ssl_context=own_tls)
        self.acl: PlainPermissionManager | None = None
        self.tls: TlsContextHolder | None = None
        self._managers_loaded = False
        self._store_starting = False
        self._registered = False
        self._tasks: list[asyncio.Task[None]] = []
        self._register_soon: asyncio.Event | None = None
        self._seeking_master_logged = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self.pull_processor: PullMessageProcessor | None = None
        self.send_processor: SendMessageProcessor | None = None
        self.schedule_message_service: ScheduleMessageService | None = None
        self.timer_message_store: TimerMessageStore | None = None  # timerWheelEnable: RIP-43's timer
        self.transactions = TransactionalMessageService(
            self.store, self.topics, self.offsets, host_address(broker_config.broker_addr), broker_config.broker_addr,
            send_check=self._send_transaction_check,
        )  # fmt: skip
        self.transaction_check_service: TransactionalMessageCheckService | None = None
        self.fast_failure: BrokerFastFailure | None = None
        self.client_manage_processor: ClientManageProcessor | None = None
        self.stats = BrokerStatsManager(broker_config.broker_cluster_name)
        self.admin_processor: AdminBrokerProcessor | None = None
        self.pop: PopConsumption | None = None
        self.metrics: BrokerMetrics | None = None  # metricsExporterType=PROM: /metrics (pumice.metrics)

    # -- start -------------------------------------------------------------------------

    async def start(self) -> None:
        # the store's lock first: a second broker on the same store stops here, before it reads
        # (and at its shutdown would rewrite) the running one's config files or unregisters it
        os.makedirs(self.store_config.store_path_root_dir, exist_ok=True)
        self.store.take_lock()
        for manager in (self.topics, self.offsets, self.subscription_groups, self.consumer_filters):
            if not manager.load():
                raise RuntimeError(f"cannot read {manager.path} nor its .bak: fix or remove it")
        self._managers_loaded = True  # from here on shutdown persists them (never defaults over unread files)
        self._start_acl()  # before the store: ACL files that do not load stop the start at once
        self._sign_namesrv_requests()
        self._sign_ha_connections()
        self.tls = start_tls(
            self.config.tls_settings(),
            [s for s in (self.server, self.fast_server, self.store.ha_service) if s is not None],
        )
        self.metrics = serve_broker_metrics(self)  # the recovery's progress, while the store loads
        if not await asyncio.to_thread(self.store.load):
            raise RuntimeError(f"cannot load the store at {self.store_config.store_path_root_dir}")
        self._warn_topics_without_config()
        self._store_starting = True  # from here on shutdown stops the store (and removes the abort file)
        if self.replicated_log is not None:
            # before the log starts: its first role change (CANDIDATE) comes at once
            handler = DLedgerRoleChangeHandler(
                asyncio.get_running_loop(), self.replicated_log, self, self.store_config.dledger_node_number
            )
            self.role_change_handler = handler
            add_handler = getattr(self.replicated_log, "add_role_change_handler", None)
            if add_handler is not None:
                add_handler(handler.handle)
        await asyncio.to_thread(self.store.start)
        if self.store_config.timer_wheel_enable:  # after the store's dispatch caught up: it reads the timer queue
            self.timer_message_store = await asyncio.to_thread(self._load_timer_message_store)
        # every put's timer routing (5.3.3's handleScheduleMessage hook), refusals too when the timer is off
        self.store.put_message_hooks.append(TimerMessageHook(self.store_config, self.timer_message_store))
        if self.store.is_master() and not self.dledger:  # DLedger: the leader starts them
            self._start_master_services()
        elif self.timer_message_store is not None and not self.dledger:  # a slave enqueues, never delivers
            self.timer_message_store.start(should_running_dequeue=False)
        self._register_processors()
        await self.server.start()
        if self.fast_server is not None:
            await self.fast_server.start()
        assert self.pull_processor is not None
        self.pull_processor.hold_service.start()
        loop = asyncio.get_running_loop()
        self._register_soon = asyncio.Event()
        self._loop = loop
        self._registered = True  # from here on shutdown unregisters
        if not self.config.namesrv_addrs():  # RocketMQ says nothing: clients would never find this broker
            log.warning(
                "broker %s has no name server: it registers nowhere and clients cannot find it; set namesrvAddr "
                "in the conf file, -n, or $NAMESRV_ADDR", self.config.broker_name,
            )  # fmt: skip
        if not self.dledger:  # a DLedger node registers at its first role change (4.9)
            await self.register_broker_all()
        self._tasks = [
            loop.create_task(self._register_loop()),
            loop.create_task(
                self._periodic(
                    "persist consumer offsets",
                    lambda: self.config.flush_consumer_offset_interval / 1000,
                    self.offsets.persist,
                    in_thread=True,
                )
            ),
            loop.create_task(self._periodic("scan not active channels", lambda: 10.0, self._scan_not_active_channels)),
            loop.create_task(
                self._periodic("persist consumer filters", lambda: 10.0, self.consumer_filters.persist, in_thread=True)
            ),
            loop.create_task(self._periodic("stats sampling", lambda: SAMPLING_INTERVAL_S, self.stats.sampling)),
            loop.create_task(
                self._periodic("save unsaved config files", lambda: 1.0, self._retry_unsaved_configs, in_thread=True)
            ),
        ]
        if self.fast_failure is not None:
            self._tasks.append(loop.create_task(self.fast_failure.run()))  # every 10 ms while a request waits
        if self.pop is not None:  # POP's long polling; its revive is a master service
            self._tasks += self.pop.start()
            if self.schedule_message_service is not None:  # the master services run
                self.pop.start_revive()
        if self.admin_processor is not None:  # the runtime info's msg*TotalTodayMorning, at each local midnight
            self._tasks.append(loop.create_task(self.admin_processor.broker_stats.record_at_midnights()))
        if self.slave_synchronize is not None:
            self._tasks.append(loop.create_task(self.slave_synchronize.run()))
        elif not self.dledger:
            self._tasks.append(loop.create_task(self._print_master_and_slave_diff_loop()))
        if self.metrics is not None:
            self.metrics.start()  # last: it reads what the start built
        log.info("The broker[%s, %s] boot success.", self.config.broker_name, self.config.broker_addr)

    def _new_slave_synchronize(self) -> SlaveSynchronize:
        return SlaveSynchronize(
            RemotingClient(ssl_context=self._own_tls),
            self.config.broker_addr,
            self.topics,
            self.offsets,
            self.subscription_groups,
            ScheduleMessageService(self.store),
            lambda: self.timer_message_store,
        )

    def _load_timer_message_store(self) -> TimerMessageStore:
        timer = TimerMessageStore(self.store)
        if not timer.load():
            raise RuntimeError(
                f"cannot load the timer store (timerlog, timermetrics) in {self.store_config.store_path_root_dir}"
            )
        return timer

    def _start_master_services(self) -> None:
        if self.timer_message_store is not None:  # only a master delivers timer messages
            self.timer_message_store.start(should_running_dequeue=True)
        schedule = ScheduleMessageService(self.store)
        schedule.start()  # kept only once started: shutdown persists it (never over an unread file)
        self.schedule_message_service = schedule
        check = TransactionalMessageCheckService(self.transactions, self._transaction_settings)
        check.start()
        self.transaction_check_service = check
        if self.admin_processor is not None:
            self.admin_processor.schedule_message_service = schedule
        if self.pop is not None:  # None at start-up: the start starts it once the processors exist
            self.pop.start_revive()

    async def _stop_master_services(self) -> None:
        schedule, self.schedule_message_service = self.schedule_message_service, None
        check, self.transaction_check_service = self.transaction_check_service, None
        if self.admin_processor is not None:
            self.admin_processor.schedule_message_service = None
        if self.pop is not None:
            await self.pop.stop_revive()
        if schedule is not None:
            await asyncio.to_thread(schedule.shutdown)
        if self.timer_message_store is not None:
            await asyncio.to_thread(self.timer_message_store.stop)
        if check is not None:
            await asyncio.to_thread(check.shutdown)

    # -- DLedger roles (DLedgerRoleChangeHandler calls these on the loop) ------------------------

    @property
    def broker_role(self) -> BrokerRole:
        return self.store_config.broker_role

    def dispatch_behind_bytes(self) -> int:
        return self.store.dispatch_behind_bytes()

    def recover_topic_queue_table(self) -> None:
        self.store.recover_topic_queue_table_locked()

    async def change_to_slave(self, broker_id: int) -> None:
        """4.9's changeToSlave: slave with ``broker_id``, no schedule service nor transaction
        checker, SlaveSynchronize from the master the name servers name, registered at once."""
        log.info("Begin to change to slave brokerName=%s brokerId=%d", self.config.broker_name, broker_id)
        self.config.broker_id = broker_id
        self.store_config.broker_role = BrokerRole.SLAVE
        await self._stop_master_services()
        if self.timer_message_store is not None:  # enqueues up to the master's offset, never delivers
            self.timer_message_store.start(should_running_dequeue=False)
        if self.slave_synchronize is None:
            self.slave_synchronize = self._new_slave_synchronize()
            if self._loop is not None:
                self._tasks.append(self._loop.create_task(self.slave_synchronize.run()))
        await self.register_broker_all()
        log.info("Finish to change to slave brokerName=%s brokerId=%d", self.config.broker_name, broker_id)

    async def change_to_master(self, role: BrokerRole) -> None:
        """4.9's changeToMaster: SlaveSynchronize stopped, the schedule service and the
        transaction checker started, brokerId 0 and ``role``, registered at once."""
        if role is BrokerRole.SLAVE:
            return
        log.info("Begin to change to master brokerName=%s", self.config.broker_name)
        sync, self.slave_synchronize = self.slave_synchronize, None
        if sync is not None:
            await sync.stop()
            await sync.client.close()
        self.config.broker_id = 0
        self.store_config.broker_role = role
        if self.schedule_message_service is None:
            self._start_master_services()
        await self.register_broker_all()
        log.info("Finish to change to master brokerName=%s", self.config.broker_name)

    def _register_processors(self) -> None:
        c = self.config
        send = SendMessageProcessor(
            self.store, self.topics, store_host=c.broker_addr, cluster_name=c.broker_cluster_name,
            broker_perm=c.broker_permission, subscription_groups=self.subscription_groups,
            region_id=c.region_id, trace_on=c.trace_on, transactions=self.transactions,
            reject_transaction_message=c.reject_transaction_message, producers=self.producers,
            store_reply_message_enable=c.store_reply_message_enable, stats=self.stats, acl=self.acl,
        )  # fmt: skip
        pull = PullMessageProcessor(
            self.store, self.topics, self.offsets, broker_perm=c.broker_permission,
            long_polling_enable=c.long_polling_enable, short_polling_time_mills=c.short_polling_time_mills,
            consumers=self.consumers, subscription_groups=self.subscription_groups,
            slave_read_enable=c.slave_read_enable, broker_name=c.broker_name, broker_addr=c.broker_addr,
            enable_property_filter=c.enable_property_filter, consumer_filters=self.consumer_filters,
            filter_support_retry=c.filter_support_retry, stats=self.stats,
            lite_pull_message_enable=c.lite_pull_message_enable,
        )  # fmt: skip
        self.pull_processor = pull
        self.send_processor = send
        self.store.message_arriving_listener = pull.hold_service
        self.pop = PopConsumption(
            self.store, self.topics, self.offsets, self.subscription_groups, c, consumer_filters=self.consumer_filters,
            consumers=self.consumers, config_dir=self.store_config.config_dir, namesrv_addrs=c.namesrv_addrs,
            client=self.namesrv_client,
        )  # fmt: skip
        self.store.dispatch_on_caller = True  # the send processor dispatches its puts on the loop
        client_manage = ClientManageProcessor(
            self.consumers, self._prepare_heartbeat_groups, self.producers, self._group_notifies,
            enable_property_filter=c.enable_property_filter,
        )  # fmt: skip
        self.client_manage_processor = client_manage
        consumer_manage = ConsumerManageProcessor(self.store, self.offsets)
        query = QueryMessageProcessor(self.store, self.acl)
        pools = {
            # a send waiting for its flush or its slave holds no thread in RocketMQ 4.9
            # (asyncSendMessage); here it holds a slot, so every queued send gets one: one slot
            # serialised SYNC_FLUSH and SYNC_MASTER sends (one disk or slave round trip each)
            "send": ProcessorPool("SendMessageThread", c.send_thread_pool_queue_capacity,
                                  c.send_thread_pool_queue_capacity, track_waiting=True),
            "pull": ProcessorPool("PullMessageThread", c.pull_message_thread_pool_nums,
                                  c.pull_thread_pool_queue_capacity, track_waiting=True),
            "client": ProcessorPool("ClientManageThread", c.client_manage_thread_pool_nums,
                                    c.client_manager_thread_pool_queue_capacity, track_waiting=True),
            "consumer": ProcessorPool("ConsumerManageThread", c.consumer_manage_thread_pool_nums,
                                      c.consumer_manager_thread_pool_queue_capacity),
            "query": ProcessorPool("QueryMessageThread", c.query_message_thread_pool_nums,
                                   c.query_thread_pool_queue_capacity),
            "admin": ProcessorPool("AdminBrokerThread", c.admin_broker_thread_pool_nums, 10_000),
        }  # fmt: skip
        self.fast_failure = BrokerFastFailure(pools, self._fast_failure_settings,
                                              self.store.is_os_page_cache_busy)  # fmt: skip
        admin = AdminBrokerProcessor(
            self.store, self.topics, self.subscription_groups, self.offsets, self.consumers, c, self.store_config,
            self.trigger_register, on_config_changed=self._on_config_changed, stats=self.stats,
            producers=self.producers, transactions=self.transactions, consumer_filters=self.consumer_filters,
            schedule_message_service=self.schedule_message_service, acl=self.acl,
            timer_message_store=self.timer_message_store,
            thread_pools={  # the runtime info's *ThreadPoolQueueSize and *ThreadPoolQueueCapacity
                "send": (pools["send"], c.send_thread_pool_queue_capacity),
                "pull": (pools["pull"], c.pull_message_thread_pool_nums),
                "query": (pools["query"], c.query_message_thread_pool_nums),
            },
        )  # fmt: skip
        self.admin_processor = admin
        send.broker_name = c.broker_name
        recall = RecallMessageProcessor(self.store, self.topics, c, send.store_host)
        table: list[tuple[RequestProcessor, str, list[int]]] = [
            (recall, "send", [RequestCode.RECALL_MESSAGE]),
            (send, "send", [RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE,
                            RequestCode.CONSUMER_SEND_MSG_BACK, RequestCode.SEND_REPLY_MESSAGE,
                            RequestCode.SEND_REPLY_MESSAGE_V2,
                            RequestCode.END_TRANSACTION]),
            (pull, "pull", [RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE]),
            (client_manage, "client", [RequestCode.HEART_BEAT, RequestCode.UNREGISTER_CLIENT,
                                       RequestCode.GET_CONSUMER_LIST_BY_GROUP, RequestCode.LOCK_BATCH_MQ,
                                       RequestCode.UNLOCK_BATCH_MQ, RequestCode.CHECK_CLIENT_CONFIG]),
            (consumer_manage, "consumer", [RequestCode.QUERY_CONSUMER_OFFSET, RequestCode.UPDATE_CONSUMER_OFFSET,
                                           RequestCode.GET_MAX_OFFSET, RequestCode.GET_MIN_OFFSET,
                                           RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                                           RequestCode.GET_EARLIEST_MSG_STORETIME]),
            (query, "query", [RequestCode.QUERY_MESSAGE, RequestCode.VIEW_MESSAGE_BY_ID]),
            (admin, "admin", list(AdminBrokerProcessor.CODES)),
            *((p, "pull", codes) for p, codes in self.pop.processors()),
        ]  # fmt: skip
        for processor, pool, codes in table:
            for code in codes:
                self.server.register_processor(code, processor, pools[pool])
                if self.fast_server is not None and pool != "pull":
                    self.fast_server.register_processor(code, processor, pools[pool])
        for srv in (self.server, self.fast_server):
            if srv is not None:
                srv.on_channel_close.append(self.consumers.do_channel_close_event)
                srv.on_channel_close.append(self.producers.do_channel_close_event)

    def _on_config_changed(self, fields: set[str]) -> None:
        """UPDATE_BROKER_CONFIG changed ``fields`` of the live configs: hand the new values to
        the parts that keep a copy."""
        c = self.config
        if "broker_permission" in fields:
            for processor in (self.send_processor, self.pull_processor):
                if processor is not None:
                    processor.broker_perm = c.broker_permission
            # as upstream: a new data version, so the name servers take the routes' new perm now
            self.topics.data_version.next_version()
            self.trigger_register()
        if self.pull_processor is not None:
            self.pull_processor.lite_pull_message_enable = c.lite_pull_message_enable
        if self.send_processor is not None:
            self.send_processor.region_id, self.send_processor.trace_on = c.region_id, c.trace_on
            self.send_processor.reject_transaction_message = c.reject_transaction_message
            self.send_processor.store_reply_message_enable = c.store_reply_message_enable
        self.consumers.notify_ids_changed = c.notify_consumer_ids_changed_enable
        self.topics.auto_create_topic_enable = c.auto_create_topic_enable
        self.subscription_groups.auto_create_subscription_group = c.auto_create_subscription_group
        if self.pull_processor is not None:
            self.pull_processor.slave_read_enable = c.slave_read_enable
            self.pull_processor.enable_property_filter = c.enable_property_filter
            self.pull_processor.filter_support_retry = c.filter_support_retry
        self._set_calc_bit_map()
        if self.client_manage_processor is not None:
            self.client_manage_processor.enable_property_filter = c.enable_property_filter

    def _set_calc_bit_map(self) -> None:
        """CommitLogDispatcherCalcBitMap, while ``enableCalcFilterBitMap`` is on."""
        on = self.config.enable_calc_filter_bit_map
        self.store.calc_bit_map = self.consumer_filters.calc_bit_map if on else None
        if on and not self.store_config.enable_consume_queue_ext:
            log.warning("enableCalcFilterBitMap is on but enableConsumeQueueExt is off: no bit map is kept")

    async def _prepare_heartbeat_groups(self, groups: list[tuple[str, bool]]) -> dict[str, bool]:
        """A heartbeat's consumer groups (name, unitMode): their subscription groups and %RETRY%
        topics, the missing ones created off the loop with one save of each file; each group's
        notifyConsumerIdsChangedEnable (True for a group that does not exist, as 4.9)."""
        table = self.subscription_groups.subscription_group_table
        configs: dict[str, SubscriptionGroupConfig | None] = {g: table.get(g) for g, _ in groups}
        if None in configs.values():
            configs = await asyncio.to_thread(self.subscription_groups.find_subscription_group_configs, list(configs))
        missing: dict[tuple[int, int], list[str]] = {}  # (retryQueueNums, topicSysFlag) → retry topics
        for group, unit_mode in groups:
            config = configs.get(group)
            topic = RETRY_GROUP_TOPIC_PREFIX + group
            if config is not None and self.topics.select_topic_config(topic) is None:
                missing.setdefault((config.retry_queue_nums, TOPIC_SYS_FLAG_UNIT_SUB if unit_mode else 0), []).append(
                    topic
                )
        for (queue_nums, sys_flag), topics in missing.items():
            await asyncio.to_thread(
                self.topics.create_topics_in_send_message_back_method, topics, queue_nums, PERM_READ | PERM_WRITE,
                sys_flag,
            )  # fmt: skip
        return {g: c.notify_consumer_ids_changed_enable if c is not None else True for g, c in configs.items()}

    def _fast_failure_settings(self) -> tuple[bool, int, int, int]:
        c = self.config
        return (c.broker_fast_failure_enable, c.wait_time_mills_in_send_queue, c.wait_time_mills_in_pull_queue,
                c.wait_time_mills_in_heartbeat_queue)  # fmt: skip

    def _transaction_settings(self) -> tuple[int, int, int, int]:
        """The check's settings, read live: interval ms, timeout ms, check max, fileReservedTime h."""
        c = self.config
        return (c.transaction_check_interval, c.transaction_time_out, c.transaction_check_max,
                self.store_config.file_reserved_time)  # fmt: skip

    def _send_transaction_check(self, m: MessageExt) -> None:
        """CHECK_TRANSACTION_STATE (39), oneway, to a live producer of the half's group, with the
        half re-encoded under its real topic and queue as the body (4.9's sendCheckMessage).
        Called in the check thread: the send runs on the loop."""
        props = m.properties
        group = props.get(MessageConst.PROPERTY_PRODUCER_GROUP, "")
        uniq = props.get(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "")
        header = {"commitLogOffset": m.commit_log_offset, "offsetMsgId": m.msg_id, "msgId": uniq,
                  "transactionId": uniq, "tranStateTableOffset": m.queue_offset}  # fmt: skip
        try:
            real_qid = int(props.get(MessageConst.PROPERTY_REAL_QUEUE_ID, "0"))
        except ValueError:
            real_qid = 0
        body = encode_record(
            body=m.body, topic=props.get(MessageConst.PROPERTY_REAL_TOPIC, m.topic), properties=props,
            queue_id=real_qid, flag=m.flag, queue_offset=m.queue_offset, physical_offset=m.commit_log_offset,
            sys_flag=m.sys_flag, born_timestamp=m.born_timestamp, born_host=m.born_host,
            store_timestamp=m.store_timestamp, store_host=m.store_host, reconsume_times=m.reconsume_times,
            prepared_transaction_offset=m.prepared_transaction_offset,
        )  # fmt: skip

        def send() -> None:
            channel = self.producers.available_channel(group)
            if channel is None:
                log.warning("Check transaction failed, channel is null. groupId=%s", group)
                return
            request = RemotingCommand(code=RequestCode.CHECK_TRANSACTION_STATE, flag=RPC_ONEWAY, ext_fields=header,
                                      body=body, language="JAVA")  # fmt: skip
            channel.send(request)

        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(send)
            except RuntimeError:  # the loop has closed: the broker is stopping
                pass

    def _group_notifies(self, group: str) -> bool:
        config = self.subscription_groups.subscription_group_table.get(group)
        return config.notify_consumer_ids_changed_enable if config is not None else True

    def _scan_not_active_channels(self) -> None:
        self.producers.scan_not_active_channel()
        self.consumers.scan_not_active_channel()

    def trigger_register(self) -> None:
        """Register with the name servers now rather than at the next period (admin topic changes)."""
        event, loop = self._register_soon, self._loop
        if event is None or loop is None:
            return
        try:
            on_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            event.set()
        else:  # a worker thread (a topic created in asyncio.to_thread): an Event is not thread-safe
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # the loop has closed: nothing to register any more
                pass

    def _on_topic_created(self, tc: TopicConfig) -> None:
        self.trigger_register()  # new routes reach the name servers at once, not in 30 s

    # -- name servers ------------------------------------------------------------------

    @property
    def ha_server_addr(self) -> str:
        port = self.store.ha_port() or self.store_config.ha_listen_port
        return f"{self.config.broker_ip2 or self.config.broker_ip1}:{port}"

    def _register_request(self) -> RemotingCommand:
        c = self.config
        wrapper = self.topics.topic_config_serialize_wrapper()
        perm = c.broker_permission
        if not (perm & PERM_READ and perm & PERM_WRITE):
            # a broker not both readable and writable publishes its own permission as every
            # topic's (registerBrokerAll): producers stop choosing it, or consumers reading it
            for tc in wrapper["topicConfigTable"].values():
                tc["perm"] = perm
        body = {"topicConfigSerializeWrapper": wrapper, "filterServerList": []}
        return RemotingCommand(
            code=RequestCode.REGISTER_BROKER,
            ext_fields={
                "brokerName": c.broker_name, "brokerAddr": c.broker_addr, "clusterName": c.broker_cluster_name,
                "haServerAddr": self.ha_server_addr, "brokerId": c.broker_id,
                "compressed": False,
            },
            body=orjson.dumps(body),
            language="PYTHON",
        )  # fmt: skip

    async def register_broker_all(self) -> int:
        """Register with every name server; returns how many accepted."""
        accepted: list[RemotingCommand] = []
        for addr in self.config.namesrv_addrs():
            try:
                r = await self.namesrv_client.invoke(addr, self._register_request(), timeout_s=6)
            except (RemotingConnectError, RemotingTimeoutError) as e:
                log.warning("register broker to name server %s failed: %s", addr, e)
                continue
            if r.code == ResponseCode.SUCCESS:
                accepted.append(r)
                if r.remark:  # the name server's warning (another broker holds our name and id)
                    log.warning("name server %s: %s", addr, r.remark)
            else:
                log.warning("name server %s refused the registration: %s %s", addr, r.code, r.remark)
        if accepted:
            self._on_register_results(accepted)
        return len(accepted)

    def _on_register_results(self, answers: list[RemotingCommand]) -> None:
        """A slave learns its master's addresses from the name servers (RegisterBrokerResult).

        The first answer naming a master wins (a name server that has not seen the master yet
        does not unset it). When none names one, the master is gone: SlaveSynchronize stops
        calling its old address, as RocketMQ sets a null masterAddr. The HA client keeps its
        address; it reconnects there when the master comes back."""
        if self.slave_synchronize is None:
            return
        ha_addr = next((a for r in answers if (a := r.ext_str("haServerAddr", "") or "")), "")
        master_addr = next((a for r in answers if (a := r.ext_str("masterAddr", "") or "")), "")
        if ha_addr and not self.store_config.has_fixed_ha_master_address:
            try:
                self.store.update_ha_master_address(ha_addr)
            except ValueError as e:
                log.warning("the name server gave a bad master HA address: %s", e)
        self.slave_synchronize.master_addr = master_addr or None

    async def unregister_broker_all(self) -> None:
        c = self.config
        for addr in self.config.namesrv_addrs():
            req = RemotingCommand(
                code=RequestCode.UNREGISTER_BROKER,
                ext_fields={"brokerName": c.broker_name, "brokerAddr": c.broker_addr,
                            "clusterName": c.broker_cluster_name, "brokerId": c.broker_id},
            )  # fmt: skip
            try:
                await self.namesrv_client.invoke(addr, req, timeout_s=3)
            except (RemotingConnectError, RemotingTimeoutError) as e:
                log.warning("unregister broker from name server %s failed: %s", addr, e)

    def _next_register_s(self) -> float:
        """registerNameServerPeriod; a slave whose master is not registered yet asks again every
        2 s (4.9 waits the whole period, and SYNC_MASTER answers SLAVE_NOT_AVAILABLE meanwhile):
        a registration is the only way it learns the master's HA address."""
        sync = self.slave_synchronize
        if sync is not None and sync.master_addr is None and not self.store_config.has_fixed_ha_master_address:
            if not self._seeking_master_logged:
                self._seeking_master_logged = True
                log.warning("slave %s[%d]: no master registered with the name servers yet; asking every %.0f s",
                         self.config.broker_name, self.config.broker_id, SLAVE_SEEK_MASTER_S)  # fmt: skip
            return min(SLAVE_SEEK_MASTER_S, self.config.register_period_s)
        if sync is not None and self._seeking_master_logged:
            self._seeking_master_logged = False
            log.info("slave %s[%d]: master %s", self.config.broker_name, self.config.broker_id, sync.master_addr)
        return self.config.register_period_s

    async def _register_loop(self) -> None:
        assert self._register_soon is not None
        # 4.9's schedule starts 10 s after the start's registration, then every period: a broker
        # started before its name server is registered within 10 s, not 30
        wait_s = min(FIRST_REREGISTER_S, self._next_register_s())
        while True:
            # asyncio.timeout, not wait_for: on 3.11 a cancel that comes as the event is set
            # is swallowed by wait_for, and shutdown then waited for this task for ever
            try:
                async with asyncio.timeout(wait_s):
                    await self._register_soon.wait()
            except TimeoutError:
                pass
            self._register_soon.clear()
            try:
                await self.register_broker_all()
            except Exception:  # one bad round must not end registration (the name servers would drop us)
                log.exception("register broker to the name servers failed")
            wait_s = self._next_register_s()

    async def _periodic(
        self, what: str, period_s: Callable[[], float], job: Callable[[], Any], in_thread: bool = False
    ) -> None:
        """Run ``job`` every ``period_s()`` seconds (read each round: UPDATE_BROKER_CONFIG may
        change it) for the broker's life: a failure is logged and the schedule goes on (one bad
        entry must not end, e.g., offset persistence for good)."""
        while True:
            await asyncio.sleep(period_s())
            try:
                if in_thread:
                    await asyncio.to_thread(job)
                else:
                    job()
            except Exception:
                log.exception("%s failed", what)

    def _warn_topics_without_config(self) -> None:
        """WARN about topics with ConsumeQueues but no config (a topics.json that lost them, as
        RocketMQ's or an older Pumice's could on a full disk): their messages are unreadable until
        the topic is made again, and CLEAN_UNUSED_TOPIC (or DELETE_TOPIC) would delete them. Not
        rebuilt from the directories: queue numbers, perm and order are not there, and a deleted
        topic whose queues were not cleaned yet would come back. Retry topics come back with the
        next heartbeat or send-back."""
        orphans = sorted(
            t
            for t in list(self.store.consume_queue_table)
            if not self.topics.contains_topic(t) and not t.startswith(RETRY_GROUP_TOPIC_PREFIX)
        )
        if orphans:
            named = ", ".join(orphans[:50]) + (" ..." if len(orphans) > 50 else "")
            log.warning("%d topics have ConsumeQueues in the store but no config in %s: their messages are unreadable "
                        "until each is created again (updateTopic), and CLEAN_UNUSED_TOPIC would delete them: %s",
                        len(orphans), self.topics.path, named)  # fmt: skip

    def _retry_unsaved_configs(self) -> None:
        """Save again each config file whose last save failed (once its back-off has passed)."""
        for manager in (self.topics, self.subscription_groups, self.offsets, self.consumer_filters):
            manager.retry_persist()

    async def _print_master_and_slave_diff_loop(self) -> None:
        await asyncio.sleep(10)
        while True:
            if self.store.ha_connection_count():
                log.info("Slave fall behind master: %d bytes", self.store.slave_fall_behind_bytes())
            await asyncio.sleep(60)

    def _start_acl(self) -> None:
        """aclEnable: every request on both ports is checked (pumice.acl) before its processor."""
        if not self.config.acl_enable:
            return
        manager = start_manager(self.config.rocketmq_home, "broker.conf")
        validator = PlainAccessValidator(manager)
        for server in (self.server, self.fast_server):
            if server is not None:
                server.before_request = validator.check
        manager.start_watching()
        self.acl = manager
        if self.store.ha_service is not None:
            self.store.ha_service.auth = self._ha_authenticator(manager)
        log.info("ACL on: %d accounts, %d global white patterns, from %s",
                 len(manager.rules.accounts), len(manager.rules.global_white), manager.default_file)  # fmt: skip

    def _sign_namesrv_requests(self) -> None:
        """namesrvAccessKey: the registrations signed with that account (a name server with
        aclEnable refuses unsigned ones)."""
        access_key = self.config.namesrv_access_key
        if not access_key:
            return
        keys = signing_credentials(self.config.rocketmq_home, "namesrvAccessKey", access_key, "broker.conf")
        self.namesrv_client.rpc_hook = keys.sign_request
        log.info("name-server requests signed as %s", access_key)

    def _sign_ha_connections(self) -> None:
        """haAccessKey: the HA connection to a Pumice master with aclEnable opens with an auth
        frame signed by that account, its secret key read from this broker's ACL files (never
        broker.conf: GET_BROKER_CONFIG hands that out)."""
        access_key = self.store_config.ha_access_key
        if not access_key or self.store.ha_service is None:
            return
        keys = signing_credentials(self.config.rocketmq_home, "haAccessKey", access_key, "broker.conf")
        self.store.ha_service.ha_client.secret_key = keys.secret_key
        log.info("HA connections signed as %s", access_key)

    def _ha_authenticator(self, manager: PlainPermissionManager) -> HAAuthenticator:
        """aclEnable: who may replicate from the HA port (``pumice.store.ha_auth``)."""
        cfg = self.store_config
        try:
            white = [remote_address_strategy(p) for p in cfg.ha_white_remote_addresses.split(";") if p.strip()]
        except AclError as e:
            raise RuntimeError(f"haWhiteRemoteAddresses {cfg.ha_white_remote_addresses!r}: {e}") from e

        def account_of(access_key: str) -> HAAccount | None:
            account = manager.rules.accounts.get(access_key)  # the rules in force (the watcher swaps them)
            return None if account is None else HAAccount(account.secret_key, account.admin)

        return HAAuthenticator(account_of, white, cfg.ha_allow_unauthenticated)

    # -- shutdown ----------------------------------------------------------------------

    async def shutdown(self) -> None:
        if self.metrics is not None:
            self.metrics.shutdown()
        if self.acl is not None:
            self.acl.shutdown()
        if self.tls is not None:
            self.tls.shutdown()
        if self.slave_synchronize is not None:
            await self.slave_synchronize.stop()  # a copy under way ends before the store does
        tasks, self._tasks = self._tasks, []
        for t in tasks:
            t.cancel()
        for t, res in zip(tasks, await asyncio.gather(*tasks, return_exceptions=True), strict=True):
            if isinstance(res, Exception):
                log.error("broker task %s had ended with %r", t.get_name(), res)
        if self._registered:
            await self.unregister_broker_all()
        await self.namesrv_client.close()
        if self.slave_synchronize is not None:
            await self.slave_synchronize.client.close()
        if self.fast_server is not None:
            await self.fast_server.close()
        await self.server.close()
        if self.pull_processor is not None:
            await self.pull_processor.hold_service.shutdown()
        if self.pop is not None:
            await self.pop.stop_revive()
        if self.schedule_message_service is not None:
            await asyncio.to_thread(self.schedule_message_service.shutdown)
        if self.transaction_check_service is not None:
            await asyncio.to_thread(self.transaction_check_service.shutdown)
        if self.timer_message_store is not None:
            await asyncio.to_thread(self.timer_message_store.shutdown)
        if self._managers_loaded:
            for manager in (self.offsets, self.topics, self.subscription_groups, self.consumer_filters):
                await asyncio.to_thread(manager.persist)
        if self._store_starting:
            await asyncio.to_thread(self.store.shutdown)
        log.info("The broker[%s] shut down.", self.config.broker_name)
