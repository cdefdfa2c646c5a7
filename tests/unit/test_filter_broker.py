"""Broker side of SQL92 filtering: ConsumerFilterManager registration rules
(versions, dead and revived data, expressions that do not compile),
persistence with compiled expressions, the pull-time refusals of 4.9.8, and
the commit-log filter over real stored records (properties read from the
record, matching records kept as adjacent runs)."""

from __future__ import annotations

from array import array

import pytest

from rmq.broker.config import BrokerConfig
from rmq.broker.consumer_filter_manager import ConsumerFilterManager
from rmq.client.heartbeat import build_subscription
from rmq.common.codes import ResponseCode as RC
from rmq.filter.message_filter import filter_result, record_properties
from rmq.store.message import MessageExt
from rmq.store.message_codec import encode_message
from rmq.store.results import GetMessageResult, GetMessageStatus


@pytest.fixture
def manager(tmp_path):
    return ConsumerFilterManager(BrokerConfig(), str(tmp_path))


def test_register_compiles_and_follows_versions(manager):
    assert not manager.register("T", "g", "a > 1", "TAG", 1)
    assert not manager.register("T", "g", "", "SQL92", 1)
    assert manager.register("T", "g", "a > 1", "SQL92", 10)
    data = manager.get("T", "g")
    assert data.compiled.matches({"a": "2"}) and not data.compiled.matches({"a": "1"})
    assert not manager.register("T", "g", "a > 1", "SQL92", 10)       # nothing new
    assert not manager.register("T", "g", "a > 5", "SQL92", 9)        # older client
    assert manager.get("T", "g").expression == "a > 1"
    manager.unregister("g")
    assert manager.get("T", "g").dead
    assert manager.register("T", "g", "a > 1", "SQL92", 10)           # same version revives
    assert not manager.get("T", "g").dead
    assert manager.register("T", "g", "a > 1", "SQL92", 11)           # newer, same expression
    assert manager.get("T", "g").clientVersion == 11
    assert manager.register("T", "g", "b = 'x'", "SQL92", 12)         # newer expression
    assert manager.get("T", "g").compiled.matches({"b": "x"})


def test_group_heartbeat_kills_filters_of_topics_no_longer_subscribed(manager):
    subs = [build_subscription("T1", "a > 1", "SQL92"), build_subscription("T2", "b = 2", "SQL92")]
    manager.register_group("g", subs)
    assert not manager.get("T1", "g").dead and not manager.get("T2", "g").dead
    manager.register_group("g", subs[:1])                              # T2 dropped
    assert not manager.get("T1", "g").dead and manager.get("T2", "g").dead


def test_expression_that_does_not_compile_is_not_registered(manager):
    assert not manager.register("T", "g", "a >", "SQL92", 1)
    assert manager.get("T", "g") is None and manager.filter_data_by_topic == {}
    assert manager.register("T", "g", "a > 1", "SQL92", 1)
    # a broken replacement removes the old data: pulls then report it missing
    assert not manager.register("T", "g", "a = NULL", "SQL92", 2)
    assert manager.get("T", "g") is None


def test_persisted_format_and_compiled_after_load(manager, tmp_path):
    manager.register("T", "g", "region IN ('eu')", "SQL92", 7)
    manager.persist()
    text = (tmp_path / "config" / "consumerFilter.json").read_text()
    assert "compiled" not in text
    again = ConsumerFilterManager(BrokerConfig(), str(tmp_path))
    again.load()
    data = again.get("T", "g")
    assert sorted(data.to_json_obj()) == ["bloomFilterData", "bornTime", "clientVersion",
                                          "consumerGroup", "dead", "deadTime", "expression",
                                          "expressionType", "topic"]
    assert data.compiled.matches({"region": "eu"})


def test_pull_filter_refusals_and_filters(tmp_path):
    config = BrokerConfig()
    manager = ConsumerFilterManager(config, str(tmp_path))
    tag = build_subscription("T", "TagA")
    assert manager.pull_filter("T", "g", tag, False, 1) == (None, None)
    sql = build_subscription("T", "a > 1", "SQL92")
    refusal, matches = manager.pull_filter("T", "g", sql, True, 1)
    assert refusal is None and matches({"a": "2"}) and not matches({"a": "0"})
    bad = build_subscription("T", "a >", "SQL92")
    assert manager.pull_filter("T", "g", bad, True, 1) == (
        (RC.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed"), None)
    assert manager.pull_filter("T", "g", sql, False, 1) == (
        (RC.FILTER_DATA_NOT_EXIST,
         "The broker's consumer filter data is not exist!Your expression may be wrong!"), None)
    manager.register("T", "g", "a > 1", "SQL92", 5)
    assert manager.pull_filter("T", "g", sql, False, 6) == (
        (RC.FILTER_DATA_NOT_LATEST, "the consumer's consumer filter data not latest"), None)
    refusal, matches = manager.pull_filter("T", "g", sql, False, 5)
    assert refusal is None and matches({"a": "3"})
    # retry topic: untouched unless filterSupportRetry, then the original topic's selector
    retry = build_subscription("%RETRY%g", "*")
    assert manager.pull_filter("%RETRY%g", "g", retry, False, 0) == (None, None)
    config.filterSupportRetry = True
    refusal, matches = manager.pull_filter("%RETRY%g", "g", retry, False, 0)
    assert refusal is None
    assert matches({"RETRY_TOPIC": "T", "a": "2"}) and not matches({"RETRY_TOPIC": "T", "a": "0"})
    assert matches({"RETRY_TOPIC": "Other", "a": "0"})  # no selector for that topic


# ---- records ------------------------------------------------------------------------------
def record(i: int, v6: bool = False, **props: str) -> bytes:
    host = ("::1", 10911) if v6 else ("127.0.0.1", 10911)
    return encode_message(MessageExt(
        topic="T", body=b"body-%d" % i, properties={"UNIQ_KEY": f"K{i}", **props},
        queue_offset=i, born_host=host, store_host=host, commit_log_offset=1000 + i))


def test_record_properties_reads_only_the_property_string():
    assert record_properties(memoryview(record(1, a="1", region="eu"))) == {
        "UNIQ_KEY": "K1", "a": "1", "region": "eu"}
    assert record_properties(memoryview(record(2, v6=True, a="x"))) == {"UNIQ_KEY": "K2",
                                                                          "a": "x"}
    assert record_properties(memoryview(record(3))) == {"UNIQ_KEY": "K3"}
    broken = bytearray(record(4, a="1"))
    broken[4:8] = b"\x00\x00\x00\x00"  # magic code
    assert record_properties(memoryview(broken)) is None
    assert record_properties(memoryview(record(5, a="1"))[:60]) is None


def found(runs: list[list[bytes]], first_offsets: list[int]) -> GetMessageResult:
    result = GetMessageResult(status=GetMessageStatus.FOUND, next_begin_offset=99)
    for recs, first in zip(runs, first_offsets, strict=True):
        result.body_views.append(memoryview(b"".join(recs)))
        result.run_offsets.append(first)
        result.run_counts.append(len(recs))
        result.sizes.extend(len(r) for r in recs)
    result.buffer_total_size = sum(result.sizes)
    return result


def test_filter_result_keeps_matching_records_as_runs():
    recs = [record(i, a=str(i)) for i in range(8)]
    result = found([recs[:5], recs[5:]], [10, 20])
    keep = {0, 1, 3, 5, 6}  # two stretches in the first run, one in the second
    filter_result(result, lambda p: int(p["a"]) in keep)
    assert result.status is GetMessageStatus.FOUND and result.next_begin_offset == 99
    assert [bytes(v) for v in result.body_views] == [recs[0] + recs[1], recs[3],
                                                     recs[5] + recs[6]]
    assert result.run_offsets == [10, 13, 20] and result.run_counts == [2, 1, 2]
    assert result.sizes == array("i", [len(recs[i]) for i in sorted(keep)])
    assert result.buffer_total_size == sum(len(recs[i]) for i in keep)
    assert result.message_queue_offsets == [10, 11, 13, 20, 21]


def test_filter_result_without_matches_is_no_matched_message():
    result = found([[record(i, a="1") for i in range(3)]], [0])
    filter_result(result, lambda p: False)
    assert result.status is GetMessageStatus.NO_MATCHED_MESSAGE
    assert result.body_views == [] and result.message_count == 0
    assert result.buffer_total_size == 0 and result.next_begin_offset == 99


def test_filter_result_leaves_other_statuses_alone():
    result = GetMessageResult(status=GetMessageStatus.OFFSET_FOUND_NULL)
    filter_result(result, lambda p: False)
    assert result.status is GetMessageStatus.OFFSET_FOUND_NULL
