"""StatsItem windows (VIEW_BROKER_STATS_DATA) and the named items BrokerStats keeps."""

from __future__ import annotations

import time

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
    stats = BrokerStats("DefaultCluster")
    stats.inc_put("T", 1, 2, 300)
    stats.inc_get("g", "T", 1, 3, 600, latency_ms=4)
    assert stats.get_stats_item("TOPIC_PUT_NUMS", "T").snapshot(60)["sum"] == 2
    assert stats.get_stats_item("TOPIC_PUT_SIZE", "T").snapshot(60)["sum"] == 300
    assert stats.get_stats_item("QUEUE_PUT_NUMS", "T@1").snapshot(60)["sum"] == 2
    assert stats.get_stats_item("QUEUE_PUT_SIZE", "T@1").snapshot(60)["sum"] == 300
    assert stats.get_stats_item("BROKER_PUT_NUMS", "DefaultCluster").snapshot(60)["sum"] == 2
    assert stats.get_stats_item("GROUP_GET_NUMS", "T@g").snapshot(60)["sum"] == 3
    assert stats.get_stats_item("GROUP_GET_SIZE", "T@g").snapshot(60)["sum"] == 600
    assert stats.get_stats_item("QUEUE_GET_NUMS", "T@1@g").snapshot(60)["sum"] == 3
    assert stats.get_stats_item("GROUP_GET_LATENCY", "1@T@g").snapshot(60)["avgpt"] == 4.0
    assert stats.get_stats_item("GROUP_GET_FROM_DISK_NUMS", "T@g") is None
    assert stats.get_stats_item("TOPIC_PUT_NUMS", "other") is None
    assert stats.put_total == 2 and stats.get_total == 3


def test_detail_off_keeps_no_queue_items_and_keys_latency_by_topic_and_group():
    stats = BrokerStats("C", detail=False)
    stats.inc_put("T", 0, 1, 10)
    stats.inc_get("g", "T", 0, 1, 10, latency_ms=2)
    stats.fold()
    assert "QUEUE_PUT_NUMS" not in stats.items and "QUEUE_GET_NUMS" not in stats.items
    assert list(stats.items["GROUP_GET_LATENCY"]) == ["T@g"]


def test_disk_send_back_schedule_and_moment_items():
    stats = BrokerStats("C")
    stats.inc_get("g", "T", 2, 5, 5000, from_disk=True)
    stats.inc_get("g", "T", 2, 1, 1000)
    stats.inc_send_back("g", "T")
    stats.inc_queue_get("SCHEDULE_CONSUMER", "SCHEDULE_TOPIC_XXXX", 2, 1, 200)
    stats.record_disk_fall_behind_size("g", "T", 2, 12345)
    stats.record_disk_fall_behind_time("g", "T", 2, 678)
    assert stats.get_stats_item("GROUP_GET_FROM_DISK_NUMS", "T@g").snapshot(60)["sum"] == 5
    assert stats.get_stats_item("GROUP_GET_FROM_DISK_SIZE", "T@g").snapshot(60)["sum"] == 5000
    assert stats.get_stats_item("BROKER_GET_FROM_DISK_NUMS", "C").snapshot(60)["sum"] == 5
    assert stats.get_stats_item("BROKER_GET_NUMS", "C").snapshot(60) == \
        {"avgpt": 0.0, "sum": 6, "tps": 0.1}  # 4.9.8 adds the value only: no events
    assert stats.get_stats_item("SNDBCK_PUT_NUMS", "T@g").snapshot(60)["sum"] == 1
    assert stats.get_stats_item(
        "QUEUE_GET_SIZE", "SCHEDULE_TOPIC_XXXX@2@SCHEDULE_CONSUMER").snapshot(60)["sum"] == 200
    assert stats.moments == {"GROUP_GET_FALL_SIZE": {"2@T@g": 12345},
                             "GROUP_GET_FALL_TIME": {"2@T@g": 678}}
    assert stats.groups_falling_behind(10000) == {"g"} and not stats.groups_falling_behind(20000)
    assert stats.tps_group_get_nums("g", "T") == 0.1 and stats.tps_group_get_nums("h", "T") == 0.0


def test_deleting_a_topic_or_group_forgets_its_items():
    stats = BrokerStats("C")
    for topic in ("T", "U"):
        stats.inc_put(topic, 0, 1, 10)
        for group in ("g", "h"):
            stats.inc_get(group, topic, 0, 1, 10)
            stats.inc_send_back(group, topic)
            stats.record_disk_fall_behind_size(group, topic, 0, 1)
    stats.on_topic_deleted("T")
    keys = {k for table in stats.items.values() for k in table}
    assert not {k for k in keys if k == "T" or k.startswith("T@") or "@T@" in k}
    assert {"U", "U@g", "U@h", "U@0", "0@U@g", "C"} <= keys
    assert set(stats.fall_behind) == {"0@U@g", "0@U@h"}
    stats.on_group_deleted("g")
    keys = {k for table in stats.items.values() for k in table}
    assert not {k for k in keys if k.endswith("@g")} and "U@h" in keys
    assert set(stats.fall_behind) == {"0@U@h"}


def test_stats_log_lines_are_4_9_8s(caplog):
    stats = BrokerStats("C")
    stats.inc_put("T", 0, 3, 300)
    stats.inc_get("g", "T", 0, 2, 200, latency_ms=6)
    stats.record_disk_fall_behind_size("g", "T", 0, 99)
    # the buckets are on the monotonic clock, which print_window reads: a fixed
    # time would leave the day window once the machine has been up a day
    folded = int(time.monotonic()) // 10 * 10 + 5
    stats.fold(now_s=folded)
    item = stats.items["TOPIC_PUT_NUMS"]["T"]
    assert item.log_line("TOPIC_PUT_NUMS", "T", "Minute", now_s=folded + 5) == \
        "[TOPIC_PUT_NUMS] [T] Stats In One Minute, SUM: 3 TPS: 0.05 AVGPT: 3.00"
    latency = stats.items["GROUP_GET_LATENCY"]["0@T@g"]
    assert latency.log_line("GROUP_GET_LATENCY", "0@T@g", "Hour", rt=True, now_s=folded + 5) == \
        "[GROUP_GET_LATENCY] [0@T@g] Stats In One Hour, TIMES: 1 AVGRT: 6.00"
    with caplog.at_level("INFO", logger="RocketmqStats"):
        stats.print_window("Day")
        stats.print_moments()
    text = caplog.text
    assert "[QUEUE_PUT_NUMS] [T@0] Stats In One Day, SUM: 3" in text
    assert "[BROKER_GET_NUMS] [C] Stats In One Day, SUM: 2" in text
    assert "[GROUP_GET_FALL_SIZE] [0@T@g] Stats Every 5 Minutes, Value: 99" in text


def test_version_and_time_text():
    assert version_desc(409) == "V4_9_8" and version_desc(62) == "V3_1_8_SNAPSHOT"
    assert version_desc(700) == "HIGHER_VERSION"
    assert time_text(1234).endswith(":234") and "#" in time_text(0)
