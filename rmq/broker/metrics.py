"""The broker's Prometheus metrics, named, typed and labelled as RocketMQ 5.3's
``BrokerMetricsManager`` and ``DefaultStoreMetricsManager`` export them, so
dashboards and alerts written for those keep working.

Nothing is counted for the exporter on the send and pull paths: the counters
are the broker statistics' monotonic totals (``BrokerStats.in_totals`` ...,
folded once a second with the 4.9.8 items), and the gauges are read from the
managers and the store when Prometheus scrapes.  Every sample carries
``cluster``, ``node_type="broker"`` and ``node_id`` (the broker name), as 5.3
adds them to every data point.

Where rmq has less to go on than 5.3: ``message_type`` is ``normal`` for
every message (5.3 tells fifo/delay/transaction apart per message);
``rocketmq_consumer_inflight_messages`` counts POP messages popped and not
yet acked (pull consumers keep no offset of what they pulled on the broker, so
theirs is 0), lag is ready plus in flight; ``rocketmq_half_messages`` is the
backlog of the half topic as a whole; ``rocketmq_storage_disk_ratio`` is an
rmq addition (the commit log disk's used ratio, which 4.9.8's runtime info has).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from prometheus_client.registry import Collector

from rmq.broker.stats import CREATE_BUCKETS_MS, SIZE_BUCKETS, ExecutionTimes
from rmq.common import topics as T
from rmq.common.java import is_sys_consumer_group, language_name, version_desc
from rmq.common.metrics_text import RowFamily
from rmq.remoting.rpc_latency import latency_family
from rmq.store.clean import disk_used_ratio
from rmq.store.timer.metrics import timer_distribution

_BASE = ("cluster", "node_type", "node_id")
_STORE = ("storage_type", "storage_medium")
_STORE_VALUES = ("local", "disk")
_CONSUME_MODE = {"CONSUME_ACTIVELY": "pull", "CONSUME_PASSIVELY": "push"}


def _language(code: int) -> str:
    return language_name(code).lower()


def _version(code: int) -> str:
    return version_desc(code).lower()


class BrokerCollector(Collector):
    """Reads the controller's statistics, managers and store on each scrape."""

    def __init__(self, controller: Any) -> None:
        self.c = controller
        bc = controller.broker_config
        self.base = (bc.brokerClusterName, "broker", bc.brokerName)

    def collect(self) -> Iterator:
        stats = self.c.stats
        stats.fold()
        yield from self._traffic(stats)
        yield from self._connections()
        yield from self._consumers()
        yield from self._broker()
        yield from self._storage()
        yield from self._timer()
        latency = self.c.rpc_latency
        if latency is not None:
            yield latency_family(latency, _BASE, self.base,
                                 getattr(self.c, "grpc_rpc_latency", None))
        for name, times in (("rocketmq_topic_create_execution_time", self.c.topic_create_times),
                            ("rocketmq_consumer_group_create_execution_time",
                             self.c.group_create_times)):
            if times is not None:
                yield _execution_family(name, times, self.base)

    # ---- counters and the size histogram ----------------------------------------
    def _traffic(self, stats) -> Iterator:
        base = self.base
        labels = (*_BASE, "topic", "message_type", "is_system")
        msgs_in = _counter("rocketmq_messages_in", "messages put", labels)
        bytes_in = _counter("rocketmq_throughput_in", "bytes put", labels)
        for topic, (nums, size) in list(stats.in_totals.items()):
            values = (*base, topic, "normal", _bool(T.is_system_topic(topic)))
            msgs_in.add_metric(values, nums)
            bytes_in.add_metric(values, size)
        yield msgs_in
        yield bytes_in
        labels = (*_BASE, "topic", "consumer_group", "is_retry", "is_system")
        msgs_out = _counter("rocketmq_messages_out", "messages pulled", labels)
        bytes_out = _counter("rocketmq_throughput_out", "bytes pulled", labels)
        for (topic, group), (nums, size) in list(stats.out_totals.items()):
            values = (*base, topic, group, _bool(topic.startswith(T.RETRY_GROUP_TOPIC_PREFIX)),
                      _bool(T.is_system_topic(topic) or is_sys_consumer_group(group)))
            msgs_out.add_metric(values, nums)
            bytes_out.add_metric(values, size)
        yield msgs_out
        yield bytes_out
        dlq = RowFamily("rocketmq_send_to_dlq_messages", "messages sent to a DLQ",
                        "counter", (*_BASE, "topic", "consumer_group", "is_system"))
        for (topic, group), n in list(stats.dlq_totals.items()):
            dlq.add_metric((*base, topic, group, _bool(is_sys_consumer_group(group))), n)
        yield dlq
        labels = (*_BASE, "topic")
        commits = _counter("rocketmq_commit_messages", "transactions committed", labels)
        rollbacks = _counter("rocketmq_rollback_messages", "transactions rolled back", labels)
        for (topic, committed), n in list(stats.end_tx_totals.items()):
            (commits if committed else rollbacks).add_metric((*base, topic), n)
        yield commits
        yield rollbacks
        sizes = RowFamily("rocketmq_message_size", "size of messages put",
                          "histogram", (*_BASE, "topic", "message_type"))
        for topic, hist in list((stats.size_histograms or {}).items()):
            running, buckets = 0, []
            for bound, n in zip(SIZE_BUCKETS, hist, strict=False):
                running += n
                buckets.append((str(float(bound)), running))
            running += hist[len(SIZE_BUCKETS)]
            buckets.append(("+Inf", running))
            sizes.add_histogram((*base, topic, "normal"), buckets, hist[-1])
        yield sizes

    # ---- clients ------------------------------------------------------------------
    def _connections(self) -> Iterator:
        base = self.base
        producers: dict[tuple, int] = {}
        for channels in list(self.c.producer_manager.group_channel_table.values()):
            for info in list(channels.values()):
                key = (_language(info.language), _version(info.version))
                producers[key] = producers.get(key, 0) + 1
        g = RowFamily("rocketmq_producer_connections", "producer connections",
                      "gauge", (*_BASE, "language", "version"))
        for key, n in producers.items():
            g.add_metric((*base, *key), n)
        yield g
        g = RowFamily("rocketmq_consumer_connections", "consumer connections",
                      "gauge", (*_BASE, "consumer_group", "language", "version",
                                "consume_mode", "is_system"))
        for group, info in list(self.c.consumer_manager.consumer_table.items()):
            counts: dict[tuple, int] = {}
            for ci in list(info.channel_info_table.values()):
                key = (_language(ci.language), _version(ci.version))
                counts[key] = counts.get(key, 0) + 1
            mode = _CONSUME_MODE.get(info.consume_type.name, "push")
            for key, n in counts.items():
                g.add_metric((*base, group, *key, mode, _bool(is_sys_consumer_group(group))), n)
        yield g

    def _consumers(self) -> Iterator:
        """Lag per (topic, group) from the committed offsets, as 4.9.8 consume
        stats compute it: messages behind, and how old the oldest unconsumed is."""
        c, base = self.c, self.base
        store = c.message_store
        now = int(time.time() * 1000)
        labels = (*_BASE, "topic", "consumer_group", "is_retry", "is_system")
        families = (RowFamily(name, doc, "gauge", labels) for name, doc in (
            ("rocketmq_consumer_lag_messages", "messages not yet consumed"),
            ("rocketmq_consumer_lag_latency", "age of the oldest unconsumed message (ms)"),
            ("rocketmq_consumer_inflight_messages", "messages pulled but not committed"),
            ("rocketmq_consumer_ready_messages", "messages ready to be pulled"),
            ("rocketmq_consumer_queueing_latency", "age of the oldest ready message (ms)")))
        lag, lag_ms, inflight, ready, queueing = families
        com = c.consumer_offset_manager
        pop = getattr(c, "pop_context", None)
        popped = pop.inflight() if pop is not None else {}
        for key, queues in list(com.offset_table.items()):
            topic, sep, group = key.partition("@")
            if not sep:
                continue
            behind = oldest = 0
            for qid, offset in list(queues.items()):
                max_offset = store.get_max_offset_in_queue(topic, qid)
                if max_offset > offset >= 0:
                    behind += max_offset - offset
                    ts = store.get_message_store_timestamp(topic, qid, offset)
                    if ts > 0:
                        oldest = max(oldest, now - ts)
            values = (*base, topic, group, _bool(topic.startswith(T.RETRY_GROUP_TOPIC_PREFIX)),
                      _bool(T.is_system_topic(topic) or is_sys_consumer_group(group)))
            n_inflight = popped.get((group, topic), 0)
            lag.add_metric(values, behind + n_inflight)
            lag_ms.add_metric(values, oldest)
            inflight.add_metric(values, n_inflight)
            ready.add_metric(values, behind)
            queueing.add_metric(values, oldest)
        yield from (lag, lag_ms, inflight, ready, queueing)

    # ---- the broker and its store ----------------------------------------------------
    def _broker(self) -> Iterator:
        c, base = self.c, self.base
        g = RowFamily("rocketmq_processor_watermark", "requests waiting per processor",
                      "gauge", (*_BASE, "processor"))
        for name, queue in list(c.request_queues.items()):
            g.add_metric((*base, name), len(queue))
        yield g
        yield _gauge("rocketmq_broker_permission", "brokerPermission", base,
                     c.broker_config.brokerPermission)
        yield _gauge("rocketmq_topic_number", "topics", base,
                     len(c.topic_config_manager.table))
        yield _gauge("rocketmq_consumer_group_number", "subscription groups", base,
                     len(c.subscription_group_manager.table))
        store = c.message_store
        half = store.get_max_offset_in_queue(T.TRANS_HALF_TOPIC, 0)
        done = max(0, c.consumer_offset_manager.query_offset(T.TRANS_SYS_CONSUMER_GROUP,
                                                             T.TRANS_HALF_TOPIC, 0))
        g = RowFamily("rocketmq_half_messages", "half messages not yet resolved",
                      "gauge", (*_BASE, "topic"))
        g.add_metric((*base, T.TRANS_HALF_TOPIC), max(0, half - done))
        yield g

    def _timer(self) -> Iterator:
        timer = getattr(self.c, "timer_message_store", None)
        if timer is not None:
            yield from _timer_families(timer, self.base)

    def _storage(self) -> Iterator:
        store, base = self.c.message_store, self.base
        labels = (*_BASE, *_STORE)
        values = (*base, *_STORE_VALUES)
        size = store.get_max_phy_offset() - store.get_min_phy_offset()
        earliest = store.get_earliest_message_time_store()
        reserve = int(time.time() * 1000) - earliest if earliest > 0 else 0
        dirs = store.config.commit_log_dirs()
        for name, doc, value in (
                ("rocketmq_storage_size", "bytes of commit log kept", size),
                ("rocketmq_storage_flush_behind_bytes", "bytes not yet flushed",
                 store.remain_how_many_data_to_flush()),
                ("rocketmq_storage_dispatch_behind_bytes", "bytes not yet dispatched",
                 store.dispatch_behind_bytes()),
                ("rocketmq_storage_message_reserve_time", "age of the oldest message (ms)",
                 reserve),
                ("rocketmq_storage_disk_ratio", "used ratio of the commit log's disk",
                 min((disk_used_ratio(d) for d in dirs), default=0.0))):
            g = RowFamily(name, doc, "gauge", labels)
            g.add_metric(values, value)
            yield g


def _timer_families(timer: Any, base: tuple) -> Iterator:
    """DefaultStoreMetricsManager's timer metrics (5.3.3 names; a counter
    family gets its ``_total`` on output), with the store's
    ``storage_type``/``storage_medium`` labels as 5.3.3 adds them to every
    store metric."""
    labels = (*_BASE, *_STORE)
    store_base = (*base, *_STORE_VALUES)
    for name, doc, value in (
            ("rocketmq_timer_enqueue_lag", "timer messages not yet in the wheel", timer.backlog()),
            ("rocketmq_timer_enqueue_latency", "age of the oldest timer message not yet in the "
             "wheel (ms)", timer.enqueue_latency_ms()),
            ("rocketmq_timer_dequeue_lag", "due timer messages not yet delivered",
             timer.dequeue_behind_messages()),
            ("rocketmq_timer_dequeue_latency", "how far delivery is behind the clock (ms)",
             timer.dequeue_behind_ms())):
        g = RowFamily(name, doc, "gauge", labels)
        g.add_metric(store_base, value)
        yield g
    timing = RowFamily("rocketmq_timing_messages", "timer messages waiting for their time",
                       "gauge", (*labels, "topic"))
    for topic, (count, _ts) in sorted(timer.metrics.timing_count.items()):
        timing.add_metric((*store_base, topic), count)
    yield timing
    yield _snapshot_family(timer, store_base, labels)
    for name, doc, totals in (
            ("rocketmq_timer_enqueue", "timer messages put into the wheel", timer.enqueue_totals),
            ("rocketmq_timer_dequeue", "timer messages delivered", timer.dequeue_totals)):
        c = _counter(name, doc, (*labels, "topic"))
        for topic, n in sorted(totals.items()):
            c.add_metric((*store_base, topic), n)
        yield c


def _snapshot_family(timer: Any, store_base: tuple, labels: tuple) -> RowFamily:
    """``rocketmq_timer_message_snapshot``: timers in the wheel due within
    each ``timer_bound_s`` bucket from now (the bucket before it excluded),
    read from the wheel's slot counts at the scrape, as 5.3.3's gauge does;
    timers due beyond 24 h are in no bucket."""
    g = RowFamily("rocketmq_timer_message_snapshot",
                  "Timer message distribution snapshot, only count timing messages in 24h.",
                  "gauge", (*labels, "timer_bound_s"))
    now = int(time.time() * 1000)
    for bound, n in timer_distribution(timer.wheel, timer.precision, now):
        g.add_metric((*store_base, str(bound)), n)
    return g


def _execution_family(name: str, times: ExecutionTimes, base: tuple) -> RowFamily:
    family = RowFamily(name, "creation time (ms)", "histogram", (*_BASE, *times.labels))
    bounds = [str(float(b)) for b in CREATE_BUCKETS_MS] + ["+Inf"]
    for values, row in list(times.rows.items()):
        running, buckets = 0, []
        for le, n in zip(bounds, row, strict=False):
            running += n
            buckets.append((le, running))
        family.add_histogram((*base, *values), buckets, row[-1])
    return family


def _counter(name: str, doc: str, labels: tuple) -> RowFamily:
    return RowFamily(name, doc, "counter", labels)


def _gauge(name: str, doc: str, base: tuple, value: float) -> RowFamily:
    g = RowFamily(name, doc, "gauge", _BASE)
    g.add_metric(base, value)
    return g


def _bool(value: bool) -> str:
    return "true" if value else "false"
