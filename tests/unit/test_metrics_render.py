"""``metrics_text.render`` writes exactly the bytes prometheus_client writes."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from rmq.broker.metrics import BrokerCollector
from rmq.broker.stats import BrokerStats
from rmq.common.metrics_text import RowFamily, render


class _Fixed:
    def __init__(self, *families) -> None:
        self.families = families

    def collect(self):
        return iter(self.families)


def _registry(*collectors) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    for collector in collectors:
        registry.register(collector)
    return registry


def test_rows_match_prometheus_client_with_escapes_and_big_numbers():
    labels = ("zeta", "alpha", "node_id")
    counter = RowFamily("rmq_things", "things\nwith a \\ in the help", "counter", labels)
    counter.add_metric(("z", "a", "n"), 3)
    counter.add_metric(('quo"te', "back\\slash", "new\nline"), 12_345_678)
    counter.add_metric(("", "x", "y"), 2.5)
    gauge = RowFamily("rmq_level", "a level", "gauge", ("b", "a"))
    gauge.add_metric(("1", "2"), -1_500_000)
    gauge.add_metric(("3", "4"), float("nan"))
    gauge.add_metric(("5", "6"), float("inf"))
    gauge.add_metric(("7", "8"), 999_999)
    hist = RowFamily("rmq_size", "sizes", "histogram", ("topic", "message_type"))
    hist.add_histogram(("T", "normal"), [("1.0", 1), ("1024.0", 5), ("+Inf", 6)], 5000)
    hist.add_histogram(('T"2', "normal"), [("1.0", 0), ("+Inf", 0)], 0)
    plain = GaugeMetricFamily("rmq_plain", "from prometheus_client", labels=("k",))
    plain.add_metric(("v",), 1)
    plain_counter = CounterMetricFamily("rmq_plain_count", "also", value=7)
    registry = _registry(_Fixed(counter, gauge, hist, plain, plain_counter))
    assert render(registry) == generate_latest(registry)


def test_empty_families_match():
    registry = _registry(_Fixed(RowFamily("rmq_none", "empty", "counter", ("a",)),
                                RowFamily("rmq_h", "empty", "histogram", ("a",))))
    assert render(registry) == generate_latest(registry)


class _Traffic:
    """The broker collector's per-topic/group families over real statistics."""

    def __init__(self, stats: BrokerStats) -> None:
        self.stats = stats
        self.inner = BrokerCollector.__new__(BrokerCollector)
        self.inner.base = ("Cluster", "broker", "broker-a")

    def collect(self):
        return self.inner._traffic(self.stats)


def test_broker_traffic_families_match():
    stats = BrokerStats("Cluster")
    stats.size_histograms = {}
    for i in range(200):
        topic = f"Topic{i % 17}"
        stats.inc_put(topic, i % 4, 1, 100 * i)
        stats.inc_get(f"group{i % 3}", topic, i % 4, 2, 300, 1, False)
        stats.inc_get(f"group{i % 3}", f"%RETRY%group{i % 3}", 0, 1, 10, 1, False)
    stats.inc_dlq("group1", "Topic1")
    stats.inc_end_transaction("Topic2", True)
    stats.inc_end_transaction("Topic2", False)
    stats.fold()
    registry = _registry(_Traffic(stats))
    text = render(registry)
    assert text == generate_latest(registry)
    assert b'rocketmq_messages_in_total{cluster="Cluster"' in text
    assert b"rocketmq_message_size_bucket{" in text
