"""StatsItem windows (VIEW_BROKER_STATS_DATA) and the named items BrokerStats keeps."""

from __future__ import annotations

from rmq.broker.processor.admin_consumer import time_text, version_desc
from rmq.broker.stats import BrokerStats, StatsItem


def test_stats_item_minute_hour_day_windows():
    item = StatsItem()
    item.add(5, now_s=1000.0)  # 2000 s before "now": only in hour and day
    item.add(3, now_s=2950.0)
    item.add(4, now_s=2995.0)
    data = item.broker_stats_data(now_s=3000.0)
    assert data["statsMinute"] == {"avgpt": 3.5, "sum": 7, "tps": 7 / 60}
    assert data["statsHour"]["sum"] == 12 and data["statsHour"]["avgpt"] == 4.0
    assert data["statsDay"]["sum"] == 12
    assert StatsItem().snapshot(60, now_s=10.0) == {"avgpt": 0.0, "sum": 0, "tps": 0.0}


def test_stats_item_drops_buckets_older_than_a_day():
    item = StatsItem()
    item.add(1, now_s=0.0)
    item.add(1, now_s=90000.0)
    assert item.snapshot(86400 * 2, now_s=90000.0)["sum"] == 1


def test_broker_stats_named_items():
    stats = BrokerStats()
    stats.cluster = "DefaultCluster"
    stats.inc_put("T", 2)
    stats.inc_get("g", "T", 3)
    assert stats.get_stats_item("TOPIC_PUT_NUMS", "T").snapshot(60)["sum"] == 2
    assert stats.get_stats_item("BROKER_PUT_NUMS", "DefaultCluster").snapshot(60)["sum"] == 2
    assert stats.get_stats_item("GROUP_GET_NUMS", "T@g").snapshot(60)["sum"] == 3
    assert stats.get_stats_item("TOPIC_PUT_NUMS", "other") is None
    assert stats.put_total == 2 and stats.get_total == 3


def test_version_and_time_text():
    assert version_desc(409) == "V4_9_8" and version_desc(62) == "V3_1_8_SNAPSHOT"
    assert version_desc(700) == "HIGHER_VERSION"
    assert time_text(1234).endswith(":234") and "#" in time_text(0)
