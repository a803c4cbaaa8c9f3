"""The cloud's Prometheus metrics, in a registry of each app's own.

Invariants:
- Every ``Metrics`` has its own ``CollectorRegistry``: apps made in one process (tests,
  two clouds) never share or collide; nothing registers in the global registry.
- Request latency is a histogram by method, route template (never the raw path: a
  record id in the path would make a series per record) and status.
- Ops are counted by receipt status at the push boundary (``count_receipts``), every
  outcome present from the start (0), so a rate is defined before the first push.
- Pending forgets, work-queue depth and live pulls are read at scrape time, from the
  store (two count queries, ``cloud.store.sql_ops``) and from this process's live
  waiters; a store that fails the scrape gives ``memsync_store_up 0`` and no store
  gauges, never a failed scrape.
- No label or value carries content, a credential or a name: routes, methods, statuses,
  outcomes and item kinds only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from cloud.store.sql_ops import GaugeCounts
from protocol.operations import Receipt, ReceiptStatus

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
log = logging.getLogger("memsync.metrics")


class StoreGauges(Collector):
    """The gauges read when Prometheus scrapes (see the module invariants)."""

    def __init__(self, counts: Callable[[], GaugeCounts], live_pulls: Callable[[], int]) -> None:
        self._counts = counts
        self._live_pulls = live_pulls

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(
            "memsync_live_pulls", "Live pulls waiting in this process", value=self._live_pulls()
        )
        try:
            counts = self._counts()
        except Exception as exc:  # the scrape still answers; the store is down
            log.warning("metrics: the record store could not be read: %s", type(exc).__name__)
            yield GaugeMetricFamily("memsync_store_up", "1 when the record store answers", 0)
            return
        yield GaugeMetricFamily("memsync_store_up", "1 when the record store answers", 1)
        yield GaugeMetricFamily(
            "memsync_pending_forgets",
            "Forget events a device that may hold copies has not acknowledged",
            value=counts.pending_forgets,
        )
        yield GaugeMetricFamily(
            "memsync_pending_forget_devices",
            "Unacknowledged (forget event, device) pairs",
            value=counts.pending_forget_devices,
        )
        depth = GaugeMetricFamily(
            "memsync_work_queue_depth",
            "Consolidator work items waiting, by kind and whether they are ready",
            labels=["kind", "ready"],
        )
        for (kind, ready), n in sorted(counts.work_waiting.items()):
            depth.add_metric([kind, "true" if ready else "false"], n)
        yield depth

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return []  # collected at scrape time only; nothing to check at registration


class Metrics:
    """One app's metrics; ``render`` is the ``/metrics`` body (it reads the store)."""

    def __init__(self, counts: Callable[[], GaugeCounts], live_pulls: Callable[[], int]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.latency = Histogram(
            "memsync_http_request_duration_seconds",
            "HTTP request latency, from the request's first byte to its response's last",
            ["method", "route", "status"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.ops = Counter(
            "memsync_ops_applied",
            "Operations pushed, by receipt outcome (applied, duplicate, refused, conflict)",
            ["outcome"],
            registry=self.registry,
        )
        for status in ReceiptStatus:
            self.ops.labels(outcome=status.value)
        self.registry.register(StoreGauges(counts, live_pulls))

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        self.latency.labels(method=method, route=route, status=str(status)).observe(seconds)

    def count_receipts(self, receipts: Iterable[Receipt]) -> None:
        for receipt in receipts:
            self.ops.labels(outcome=receipt.status.value).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
