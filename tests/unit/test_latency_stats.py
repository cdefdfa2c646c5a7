"""Per-message counters of the single-send path: BrokerStats counts puts
through a pending table folded into its items (same sums and event counts as
adding each put to the items), StoreStatsService.on_put_one equals
on_put(topic, 1, size, 0), and the hold service ignores arrivals cheaply when
no pull is held while still waking a held one."""

from __future__ import annotations

import pytest

from rmq._fast import compiled_or_none
from rmq.broker.longpolling.pull_request_hold_service import PullRequest, PullRequestHoldService
from rmq.broker.stats import (
    BROKER_GET_NUMS,
    BROKER_PUT_NUMS,
    GROUP_GET_NUMS,
    GROUP_GET_SIZE,
    TOPIC_PUT_NUMS,
    BrokerStats,
)
from rmq.store.stats import PutCounters, StoreStatsService


def test_fold_puts_keeps_sums_and_event_counts():
    stats = BrokerStats("C")
    for _ in range(5):
        stats.inc_put("A")
    stats.inc_put("B", 0, 3)
    assert stats.put_total == 8
    stats.fold(now_s=1005.0)
    stats.inc_put("A", 0, 2)
    stats.fold(now_s=1012.0)
    stats.fold(now_s=1013.0)  # nothing pending: no empty bucket events
    a = stats.items[TOPIC_PUT_NUMS]["A"]
    assert list(a._buckets) == [[1000, 5, 5], [1010, 2, 1]]
    assert list(stats.items[TOPIC_PUT_NUMS]["B"]._buckets) == [[1000, 3, 1]]
    broker = stats.items[BROKER_PUT_NUMS]["C"]
    assert list(broker._buckets) == [[1000, 8, 0], [1010, 2, 0]]
    assert a.snapshot(60, now_s=1015.0) == {"avgpt": 7 / 6, "sum": 7, "tps": 7 / 60}


def test_fold_gets_keeps_sums_and_pull_counts():
    """Pulls are counted like puts: the pending (topic, group, queue) sums land
    in GROUP_GET_NUMS / GROUP_GET_SIZE with one event per pull and in
    BROKER_GET_NUMS (value only, as 4.9.8)."""
    stats = BrokerStats("C")
    stats.inc_get("g", "T", 0, 32, 32768)
    stats.inc_get("g", "T", 0, 8, 8192)
    stats.inc_get("h", "T", 0, 5)
    assert stats.get_total == 45
    stats.fold(now_s=1005.0)
    stats.inc_get("g", "T", 0, 2, 2048)
    stats.fold(now_s=1012.0)
    assert list(stats.items[GROUP_GET_NUMS]["T@g"]._buckets) == [[1000, 40, 2], [1010, 2, 1]]
    assert list(stats.items[GROUP_GET_SIZE]["T@g"]._buckets) == [[1000, 40960, 2], [1010, 2048, 1]]
    assert list(stats.items[BROKER_GET_NUMS]["C"]._buckets) == [[1000, 45, 0], [1010, 2, 0]]
    fresh = BrokerStats()
    fresh.inc_get("g", "T", 0, 120)
    assert fresh.tps_group_get_nums("g", "T") == 2.0 and fresh.tps_group_get_nums("o", "T") == 0.0


def test_reads_see_every_counted_put():
    stats = BrokerStats("C")
    assert stats.get_stats_item(TOPIC_PUT_NUMS, "T") is None
    stats.inc_put("T")
    stats.inc_put("T", size=100)
    assert stats.get_stats_item(TOPIC_PUT_NUMS, "T").snapshot(60)["sum"] == 2
    assert stats.get_stats_item(BROKER_PUT_NUMS, "C").snapshot(60)["sum"] == 2
    assert stats.get_stats_item("TOPIC_PUT_SIZE", "T").snapshot(60)["sum"] == 100


def test_on_put_one_matches_on_put():
    one, general = StoreStatsService(), StoreStatsService()
    for size in (10, 2000, 1):
        one.on_put_one("T", size)
        general.on_put("T", 1, size, 0)
    for field in ("put_message_times_total", "put_message_size_total", "put_latency",
                  "topic_put_nums", "topic_put_size", "put_message_entire_time_max"):
        assert getattr(one, field) == getattr(general, field), field


_FIELDS = ("put_message_times_total", "put_message_size_total", "put_message_failed_times",
           "put_message_entire_time_max", "get_message_entire_time_max",
           "get_message_times_total_found", "get_message_times_total_miss",
           "get_message_transfered_msg_count", "dispatch_max_buffer", "put_latency",
           "topic_put_nums", "topic_put_size")


def _count_all(c) -> None:
    for i, ms in enumerate((0, 10, 11, 50, 99, 100, 500, 999, 1000, 5000, 10000, 10001, 7)):
        c.on_put("T" if i % 3 else "U", i + 1, 100 * i, ms)
    c.on_put_one("T", 10)
    c.on_puts("V", 7, 700, 3)
    c.on_put_failed()
    for found, ms in ((3, 2), (0, 9), (32, 1)):
        c.on_get(found, ms)


@pytest.mark.compiled_only
def test_compiled_counters_count_as_the_twin():
    """rmq._fast.store_stats.PutCounters against its twin, every method and
    every latency bucket; the stats service reads them the same way."""
    fast = compiled_or_none("store_stats")
    assert fast is not None
    twin, comp = PutCounters(), fast.PutCounters()
    for c in (twin, comp):
        _count_all(c)
    for field in _FIELDS:
        assert getattr(comp, field) == getattr(twin, field), field
    assert twin.put_latency == [5, 2, 2, 2, 0, 1, 2, 0, 0, 0, 1, 1, 1]
    service = StoreStatsService()
    _count_all(service)
    info = service.runtime_info()
    assert info["putMessageTimesTotal"] == str(twin.put_message_times_total)
    assert info["putMessageDistributeTime"].startswith("[<=0ms]:5 [0~10ms]:2 ")


@pytest.mark.compiled_only
def test_compiled_counters_sum_past_a_long_and_other_numbers_as_the_twin():
    """The per-topic sums the compiled counters take in C when they stay
    within a long long: past it, and for a table value of another number
    type, they are the twin's Python sums."""
    fast = compiled_or_none("store_stats")
    assert fast is not None
    seen = []
    for c in (PutCounters(), fast.PutCounters()):
        c.topic_put_size.update({"big": (1 << 63) - 3, "huge": 1 << 70, "f": 1.5, "t": True})
        c.topic_put_nums.update({"big": -(1 << 63) + 1})
        for topic in ("big", "huge", "f", "t", "new"):
            c.on_put_one(topic, 5)
            c.on_puts(topic, -3, 2, 1)
        seen.append(({k: (type(v), v) for k, v in c.topic_put_size.items()},
                     {k: (type(v), v) for k, v in c.topic_put_nums.items()}))
    assert seen[0] == seen[1]
    assert seen[1][0]["big"] == (int, (1 << 63) + 4)


class _Channel:
    def __init__(self) -> None:
        self.sent: list = []

    def is_active(self) -> bool:
        return True

    def send_response(self, response) -> None:
        self.sent.append(response)


class _Store:
    def __init__(self) -> None:
        self.max_offset = 0

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.max_offset


class _Request:
    opaque = 7
    serialize_type = 0

    def is_oneway(self) -> bool:
        return False


def test_hold_service_wakes_on_first_arrival_and_ignores_others():
    store = _Store()
    answered: list = []

    def wakeup(channel, request):
        answered.append(request)
        return _Response()

    class _Response:
        opaque = 0
        serialize_type = 0

    hold = PullRequestHoldService(store, lambda: True, wakeup)
    hold.on_message_arriving("T", 0, 1, 0)  # nothing held: ignored
    assert answered == [] and hold.table == {}
    channel = _Channel()
    pr = PullRequest(_Request(), channel, 30_000, 2**62, 5, lambda code: code == 42)
    hold.table[("T", 1)] = [pr]
    hold.on_message_arriving("T", 0, 6, 42)  # another queue
    hold.on_message_arriving("U", 1, 6, 42)  # another topic
    hold.on_message_arriving("T", 1, 6, 41)  # filtered out
    assert answered == [] and hold.table == {("T", 1): [pr]}
    hold.on_message_arriving("T", 1, 6, 42)
    assert len(answered) == 1 and hold.table == {}
    assert channel.sent[0].opaque == 7


def test_settle_gc_freezes_what_start_up_built():
    import gc

    from rmq.broker.startup import settle_gc

    built = [{"table": i} for i in range(1000)]
    try:
        settle_gc()
        assert gc.get_freeze_count() >= len(built)
        assert not any(gc.is_tracked(o) and o in gc.get_objects(generation=2) for o in built[:3])
    finally:
        gc.unfreeze()
