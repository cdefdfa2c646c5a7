"""Pure logic of the ``rmq`` data source: options, pushed-down filters,
partition cutting, the per-trigger cap and rows from messages."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    StringStartsWith,
)

from rmq.client.message import MessageExt, MessageQueue
from spark.source.filters import Bounds, push
from spark.source.options import OptionError, sink_options, source_options
from spark.source.rows import ARROW_SCHEMA, drop_pull_properties, to_batch
from spark.source.sink import to_messages
from spark.source.store import chunks
from spark.source.stream import flatten, limit_rows, nest


def test_options_are_typed_and_checked():
    o = source_options({"namesrv": "h:1", "topic": "A, B", "maxOffsetsPerTrigger": "10",
                        "group": "g", "startingOffsets": '{"A": {"b": {"0": 5}}}'}, streaming=True)
    assert o.topics == ["A", "B"] and o.max_offsets_per_trigger == 10 and o.commit_offsets
    assert o.starting_offsets == {"A": {"b": {"0": 5}}}
    assert source_options({"path": "/s"}, streaming=False).starting_offsets == "earliest"
    assert source_options({"paths": '["/a", "/b"]'}, streaming=False).paths == ["/a", "/b"]
    bad = [
        ({}, False, "give store directories"),
        ({"path": "/s"}, True, "streaming read needs the namesrv"),
        ({"path": "/s", "namesrv": "h:1"}, False, "not both"),
        ({"namesrv": "h:1", "topic": "a b"}, False, "illegal characters"),
        ({"namesrv": "h:1", "topic": "A", "pullBatchSize": "x"}, False, "must be an integer"),
        ({"namesrv": "h:1", "topic": "A", "failOnDataLoss": "yes"}, False, "true or false"),
        ({"namesrv": "h:1", "topic": "A", "startingOffsets": "first"}, True, "startingOffsets must be"),
        ({"namesrv": "h:1", "topic": "A", "startingOffsets": '{"A": {"b": {"0": -3}}}'}, True, "-2 earliest"),
    ]
    for options, streaming, text in bad:
        with pytest.raises(OptionError, match=text):
            source_options(options, streaming)
    with pytest.raises(OptionError, match="needs the namesrv"):
        sink_options({})
    assert sink_options({"namesrv": "h:1", "topic": "T", "batchSize": "8"}).batch_size == 8


def test_filters_become_bounds():
    t = dt.datetime(2026, 1, 1, 12, 0, 0, 500, tzinfo=dt.UTC)
    ms = t.timestamp() * 1000
    b = Bounds(topics={"A", "B"})
    filters = [EqualTo(("topic",), "A"), In(("queueId",), [1, 2]), GreaterThanOrEqual(("queueOffset",), 5),
               LessThan(("queueOffset",), 9), GreaterThan(("storeTimestamp",), t),
               StringStartsWith(("tags",), "x"), EqualTo(("brokerName",), 3)]
    left = list(push(b, filters))
    assert b.topics == {"A"} and b.queue_ids == {1, 2} and b.brokers is None
    assert (b.offset_lo, b.offset_hi) == (5, 9)
    assert b.time_lo_ms == int(ms) and b.time_hi_ms is None  # floor: never narrower than asked
    assert left == filters[4:]  # times stay for Spark to check; unknown ones too
    assert b.wants("A", "x", 2) and not b.wants("B", "x", 2) and not b.wants("A", "x", 3)
    assert not b.empty()
    assert not list(push(b, [EqualTo(("topic",), "B")]))
    assert b.empty()


def test_chunks_bound_messages_and_bytes():
    size = np.array([10, 10, 10, 50, 10, 10, 10], np.int64)
    assert chunks(size, 3, 1000) == [(0, 3), (3, 6), (6, 7)]
    assert chunks(size, 100, 30) == [(0, 3), (3, 4), (4, 7)]  # a 50-byte entry alone
    assert chunks(np.empty(0, np.int64), 3, 30) == []


def test_trigger_cap_is_shared_by_backlog():
    a, b, c = (MessageQueue("T", "b", i) for i in range(3))
    start = {a: 10, b: 0}
    end = {a: 110, b: 300, c: 0}
    capped = limit_rows(start, end, 40)
    assert sum(capped[q] - start.get(q, 0) for q in capped) == 40
    assert capped[a] == 20 and capped[b] == 30 and capped[c] == 0
    assert limit_rows(start, end, 1000) == end
    assert flatten(nest(end)) == end and nest(end) == {"T": {"b": {"0": 110, "1": 300, "2": 0}}}


def test_rows_from_messages():
    m = MessageExt()
    m.topic, m.queue_id, m.queue_offset, m.commit_log_offset = "T", 3, 7, 1234
    m.born_timestamp, m.store_timestamp = 1_700_000_000_123, 1_700_000_000_456
    m.born_host, m.store_host, m.msg_id, m.body = "1.2.3.4:5", "6.7.8.9:10", "ID", b"\x00\x01"
    m.properties = {"TAGS": "t", "KEYS": "k1 k2", "MIN_OFFSET": "0", "MAX_OFFSET": "9", "u": "v"}
    drop_pull_properties([m])
    batch = to_batch([m], "broker-x")
    assert batch.schema == ARROW_SCHEMA
    row = batch.to_pylist()[0]
    assert row["brokerName"] == "broker-x" and row["tags"] == "t" and row["keys"] == "k1 k2"
    assert row["storeTimestamp"] == dt.datetime(2023, 11, 14, 22, 13, 20, 456000, tzinfo=dt.UTC)
    assert dict(row["properties"]) == {"TAGS": "t", "KEYS": "k1 k2", "u": "v"}


def test_rows_to_messages():
    batch = pa.RecordBatch.from_pydict({
        "topic": ["A", "B"], "body": ["text", "more"], "keys": [["x", "y"], None],
        "properties": pa.array([[("UNIQ_KEY", "old"), ("p", "1")], None],
                               pa.map_(pa.string(), pa.string())),
        "queueId": [1, 2]})
    msgs = to_messages(batch, None)
    assert [(m.topic, m.body, m.keys, m.properties) for m in msgs] == [
        ("A", b"text", "x y", {"p": "1", "KEYS": "x y"}), ("B", b"more", None, {})]
    assert [m.topic for m in to_messages(batch, "C")] == ["C", "C"]
    with pytest.raises(ValueError, match="empty body"):
        to_messages(pa.RecordBatch.from_pydict({"body": [b""]}), "C")
