"""NamesrvMetrics: the name server's ``/metrics`` (RocketMQ 5.3.3's name server has none).

Series carry ``node_type="namesrv"``, ``node_id`` (listenHost:listenPort as published), and
metricsLabel's pairs (``aggregation="delta"`` with metricsInDelta), as the broker's.

=====================================  ===========================  ==================================
metric                                 labels (after the base ones)  from
=====================================  ===========================  ==================================
rocketmq_rpc_latency_milliseconds                   as the broker's               each answered request (ms)
pumice_namesrv_brokers                 cluster                       brokers registered (by address)
pumice_namesrv_topics                  -                             topics with a route
rocketmq_processor_watermark           processor                     requests queued or running
=====================================  ===========================  ==================================
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client.core import Metric

from pumice.metrics import metrics_config
from pumice.metrics.broker_metrics import base_labels
from pumice.metrics.exporter import Families, ServedMetrics
from pumice.metrics.histogram import RPC_LATENCY_BOUNDS_MS
from pumice.metrics.rpc_latency import RpcLatency

if TYPE_CHECKING:
    from pumice.namesrv.namesrv_config import NamesrvConfig
    from pumice.namesrv.route_info_manager import RouteInfoManager
    from pumice.remoting.remoting_server import RemotingServer


class NamesrvMetrics(ServedMetrics):
    def __init__(self, config: NamesrvConfig, routes: RouteInfoManager, server: RemotingServer) -> None:
        self.config = config
        self.routes = routes
        self.server = server
        self.base = base_labels("", "namesrv", f"{config.listen_host}:{server.port}", config.metrics_label,
                                config.metrics_in_delta)  # fmt: skip
        self.rpc = RpcLatency()

    def start(self) -> None:
        self.server.on_rpc_done = self.rpc.record
        c = self.config
        self.serve(c.metrics_prom_exporter_host or c.listen_host, c.metrics_prom_exporter_port)

    def families(self) -> list[Metric]:
        f = Families(self.base)
        rpc = f.histogram("rocketmq_rpc_latency_milliseconds", "Time to process a request (ms)",
                          ["protocol_type", "request_code", "response_code", "is_long_polling", "result"],
                          RPC_LATENCY_BOUNDS_MS)  # fmt: skip
        for labels, counts in self.rpc.series():
            rpc(labels, counts)
        brokers = f.gauge("pumice_namesrv_brokers", "Brokers registered (by address)", ["cluster"])
        for cluster, names in list(self.routes.cluster_addr_table.items()):
            n = 0
            for name in list(names):
                data = self.routes.broker_addr_table.get(name)
                n += len(data.broker_addrs) if data is not None else 0
            brokers([cluster], n)
        f.gauge("pumice_namesrv_topics", "Topics with a route")((), len(self.routes.topic_queue_table))
        watermark = f.gauge("rocketmq_processor_watermark", "Requests queued or running in a processor's pool",
                            ["processor"])  # fmt: skip
        for pool in self.server.processor_pools():
            watermark([pool.name], pool.pending)
        return f.out


def start_namesrv_metrics(
    config: NamesrvConfig, routes: RouteInfoManager, server: RemotingServer
) -> NamesrvMetrics | None:
    """metricsExporterType=PROM: the collector, hooked on and serving; None when off."""
    if metrics_config.exporter_type(config.metrics_exporter_type) != "PROM":
        return None
    metrics = NamesrvMetrics(config, routes, server)
    metrics.start()
    return metrics
