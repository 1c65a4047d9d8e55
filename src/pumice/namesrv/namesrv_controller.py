"""NamesrvController: starts the name server's parts and owns their life cycle.

``start()`` loads kvConfig.json, listens on ``listenPort`` and runs the inactive-broker scan
every ``scanNotActiveBrokerInterval`` (10 s); a closed broker connection removes that
broker at once. ``shutdown()`` stops both. With ``aclEnable`` the state-changing requests
(``permission.NAMESRV_WRITE_CODES``) are checked against the plain ACL files first, as a
broker checks its requests (the files are watched for changes the same way).
"""

from __future__ import annotations

import asyncio
import logging

from pumice.acl.permission import NAMESRV_WRITE_CODES
from pumice.acl.plain_access_validator import PlainAccessValidator
from pumice.acl.plain_permission_manager import PlainPermissionManager, start_manager
from pumice.metrics.namesrv_metrics import NamesrvMetrics, start_namesrv_metrics
from pumice.namesrv.default_request_processor import DefaultRequestProcessor
from pumice.namesrv.kv_config_manager import KVConfigManager
from pumice.namesrv.namesrv_config import NamesrvConfig
from pumice.namesrv.route_info_manager import RouteInfoManager
from pumice.remoting.remoting_server import PartialFrameBudget, ProcessorPool, RemotingServer
from pumice.remoting.tls import TlsContextHolder, start_tls

log = logging.getLogger(__name__)


class NamesrvController:
    def __init__(self, config: NamesrvConfig) -> None:
        config.validate()
        self.config = config
        self.kv_config_manager = KVConfigManager(config.kv_config_path)
        self.route_info_manager = RouteInfoManager(config.broker_channel_expired_time)
        self.processor = DefaultRequestProcessor(self.route_info_manager, self.kv_config_manager, config)
        self.server = RemotingServer(
            config.listen_host,
            config.listen_port,
            max_frame_length=config.server_max_frame_length,
            max_idle_s=float(config.server_channel_max_idle_time_seconds),
            name="NameServer",
            partial_frames=PartialFrameBudget(config.server_max_partial_frame_bytes),
        )
        self._scan_task: asyncio.Task[None] | None = None
        self._kv_retry_task: asyncio.Task[None] | None = None
        self.tls: TlsContextHolder | None = None
        self.acl: PlainPermissionManager | None = None
        self.metrics: NamesrvMetrics | None = None  # metricsExporterType=PROM: /metrics (pumice.metrics)

    def _start_acl(self) -> None:
        """aclEnable: the writes signed by an admin account (pumice.acl), the reads open."""
        if not self.config.acl_enable:
            return
        manager = start_manager(self.config.rocketmq_home, "namesrv.conf")
        self.server.before_request = PlainAccessValidator(manager, NAMESRV_WRITE_CODES).check
        manager.start_watching()
        self.acl = manager
        log.info("ACL on for the name server's writes: %d accounts, from %s", len(manager.rules.accounts),
                 manager.default_file)  # fmt: skip

    async def start(self) -> None:
        kv = self.kv_config_manager
        if not kv.load():
            raise RuntimeError(f"cannot read {kv.path} nor its .bak: fix or remove it")
        self._start_acl()
        pool = ProcessorPool("namesrv", workers=16, capacity=10_000)
        for code in self.processor.codes:
            self.server.register_processor(code, self.processor, pool)
        self.server.on_channel_close.append(self.route_info_manager.on_channel_destroy)
        self.tls = start_tls(self.config.tls_settings(), [self.server])
        await self.server.start()
        loop = asyncio.get_running_loop()
        self._scan_task = loop.create_task(self._scan_loop())
        self._kv_retry_task = loop.create_task(self._kv_retry_loop())
        self.metrics = start_namesrv_metrics(self.config, self.route_info_manager, self.server)
        log.info("The Name Server boot success. serializeType=JSON, port=%d", self.server.port)

    async def _scan_loop(self) -> None:
        while True:  # the interval is read each time: UPDATE_NAMESRV_CONFIG may change it
            await asyncio.sleep(self.config.scan_not_active_broker_interval / 1000)
            self.route_info_manager.scan_not_active_broker()

    async def _kv_retry_loop(self) -> None:
        """kvConfig.json, when its last save failed, is saved again (checked every second)."""
        while True:
            await asyncio.sleep(1.0)
            try:
                await asyncio.to_thread(self.kv_config_manager.retry_persist)
            except Exception:  # one bad round must not end the retries
                log.exception("saving %s again failed", self.kv_config_manager.path)

    async def shutdown(self) -> None:
        if self.metrics is not None:
            self.metrics.shutdown()
        if self.acl is not None:
            self.acl.shutdown()
        if self.tls is not None:
            self.tls.shutdown()
        for task in (self._scan_task, self._kv_retry_task):
            if task is not None:
                task.cancel()
        self._scan_task = self._kv_retry_task = None
        await self.server.close()
