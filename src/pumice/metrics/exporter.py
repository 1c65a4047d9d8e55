"""MetricsExporter: ``/metrics`` in Prometheus' text format, for ``metricsExporterType=PROM``.

prometheus_client's own HTTP server (a thread per scrape, off the event loop that serves
clients) exposes one registry holding the server's collector. The collector's figures are
read from the live objects on that event loop (``on_loop``), so a scrape never reads a table
while a request changes it; the loop pays for the read only. A port that cannot be listened
on stops the start with the key's name and the address.
"""

from __future__ import annotations

import abc
import asyncio
import concurrent.futures
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from pumice.metrics.histogram import cumulative

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

log = logging.getLogger(__name__)

T = TypeVar("T")
SCRAPE_READ_TIMEOUT_S = 5.0  # a loop stuck this long gives an empty scrape, not a hung scraper thread


def on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[], T], timeout_s: float = SCRAPE_READ_TIMEOUT_S) -> T:
    """``fn()`` run on ``loop`` (from another thread), its result or its exception."""
    done: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        try:
            done.set_result(fn())
        except BaseException as e:  # handed to the scraping thread
            done.set_exception(e)

    loop.call_soon_threadsafe(run)
    return done.result(timeout_s)


class Families:
    """The metric families of one scrape; every series carries the server's base labels first."""

    def __init__(self, base: dict[str, str]) -> None:
        self.base_names = list(base)
        self.base_values = list(base.values())
        self.out: list[Metric] = []

    def gauge(self, name: str, doc: str, labels: Sequence[str] = ()) -> Callable[[Sequence[str], float], None]:
        fam = GaugeMetricFamily(name, doc, labels=[*self.base_names, *labels])
        self.out.append(fam)
        base = self.base_values
        return lambda values, v: fam.add_metric([*base, *values], v)

    def counter(self, name: str, doc: str, labels: Sequence[str] = ()) -> Callable[[Sequence[str], float], None]:
        fam = CounterMetricFamily(name, doc, labels=[*self.base_names, *labels])
        self.out.append(fam)
        base = self.base_values
        return lambda values, v: fam.add_metric([*base, *values], v)

    def histogram(
        self, name: str, doc: str, labels: Sequence[str], bounds: tuple[float, ...]
    ) -> Callable[[Sequence[str], list[float]], None]:
        fam = HistogramMetricFamily(name, doc, labels=[*self.base_names, *labels])
        self.out.append(fam)
        base = self.base_values

        def add(values: Sequence[str], counts: list[float]) -> None:
            buckets, total = cumulative(counts, bounds)
            fam.add_metric([*base, *values], buckets, total)

        return add


class LoopCollector:
    """A prometheus_client collector whose ``families`` run on the server's event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, families: Callable[[], list[Metric]]) -> None:
        self.loop = loop
        self.families = families

    def collect(self) -> Iterable[Metric]:
        try:
            return on_loop(self.loop, self.families)
        except concurrent.futures.TimeoutError:
            log.warning("metrics: the event loop did not answer within %.0f s; this scrape is empty",
                        SCRAPE_READ_TIMEOUT_S)  # fmt: skip
            return []


class MetricsExporter:
    """The HTTP server of ``/metrics`` for one collector; ``start`` raises RuntimeError naming the
    address when it cannot listen."""

    def __init__(self, host: str, port: int, collector: Any) -> None:
        self.host = host
        self.port = port
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        self._server: WSGIServer | None = None

    def start(self) -> None:
        try:
            server, _thread = start_http_server(self.port, addr=self.host, registry=self.registry)
        except OSError as e:
            raise RuntimeError(
                f"metricsPromExporterPort: cannot serve /metrics on {self.host}:{self.port}: {e.strerror or e}"
            ) from None
        self._server = server
        self.port = server.server_port  # the port taken when 0 asked for any
        log.info("metrics: Prometheus exporter serving %s", self.url)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def shutdown(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()


class ServedMetrics(abc.ABC):
    """A server's metrics (BrokerMetrics, NamesrvMetrics): its ``families`` served on ``/metrics``,
    read on the event loop that runs ``serve``."""

    exporter: MetricsExporter | None = None

    @abc.abstractmethod
    def families(self) -> list[Metric]:
        """The metric families of one scrape."""

    def serve(self, host: str, port: int) -> None:
        exporter = MetricsExporter(host, port, LoopCollector(asyncio.get_running_loop(), self.families))
        exporter.start()
        self.exporter = exporter

    @property
    def url(self) -> str:
        return self.exporter.url if self.exporter is not None else ""

    def shutdown(self) -> None:
        if self.exporter is not None:
            self.exporter.shutdown()
            self.exporter = None
