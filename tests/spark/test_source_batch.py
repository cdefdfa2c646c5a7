"""The ``rmq`` data source in batch: reads of a running broker (pulls) and of
its store directory return exactly what a producer sent, equal row for row;
filters narrow the plan; partitions are bounded; the sink's messages are read
back by the rmq consumer; failures surface as errors, never as missing rows."""

from __future__ import annotations

import shutil
import struct
import time

import pytest
from pyspark.errors import AnalysisException, PythonException
from pyspark.sql import functions as F

from rmq.testing.procs import free_port
from spark.source import store
from spark.source.filters import Bounds
from spark.source.live import plan as live_plan
from spark.source.options import source_options
from tests.spark.source_support import consume, produce, running_broker, wait_until_blocking

pytestmark = pytest.mark.timeout(240)
def key(r):
    return r.topic, r.queueId, r.queueOffset


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A broker holding SrcA (4 queues: 400 messages, a pause, 200 more) and SrcB (2 queues, 150)."""
    with running_broker(tmp_path_factory.mktemp("batch")) as b:
        b.create_topic("SrcA", 4)
        b.create_topic("SrcB", 2)
        first = produce(b.namesrv_addr, "SrcA", 400)
        time.sleep(0.05)  # the second wave is stored strictly later
        second = produce(b.namesrv_addr, "SrcA", 200, 400)
        other = produce(b.namesrv_addr, "SrcB", 150)
        yield b, first, second, other


def live(spark, b, topic="SrcA,SrcB", **options):
    r = spark.read.format("rmq").option("namesrv", b.namesrv_addr).option("topic", topic)
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load()


def stored(spark, b, **options):
    r = spark.read.format("rmq")
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load(str(b.store_dir))


def as_sent(rows) -> set[tuple]:
    return {(r.topic, r.msgId, bytes(r.body), r.tags, r.keys, r.queueId, r.queueOffset,
             tuple(sorted((k, v) for k, v in r.properties.items() if k in ("seq", "kind"))))
            for r in rows}


def truth(*waves) -> set[tuple]:
    return {(s.topic, s.msg_id, s.body, s.tags, s.keys, s.queue_id, s.queue_offset, s.props)
            for wave in waves for s in wave}


def test_live_read_returns_every_message_once(spark, cluster):
    b, first, second, other = cluster
    rows = live(spark, b).collect()
    assert len(rows) == len(first) + len(second) + len(other)
    assert as_sent(rows) == truth(first, second, other)
    big = [r for r in rows if len(r.body) > 4096]
    assert big, "the producer compressed these bodies; the rows hold them inflated"
    r = rows[0]
    assert r.brokerName == "broker-a" and r.storeHost == f"127.0.0.1:{b.port}"
    assert r.storeTimestamp.year >= 2024 and r.reconsumeTimes == 0
    assert "MIN_OFFSET" not in r.properties and r.properties["UNIQ_KEY"] == r.msgId


def test_store_read_matches_live_read(spark, cluster):
    b = cluster[0]
    from_store = sorted(stored(spark, b).where(F.col("topic").isin("SrcA", "SrcB")).collect(), key=key)
    from_broker = sorted(live(spark, b).collect(), key=key)
    assert len(from_store) == 750
    assert from_store == from_broker


def test_store_read_skips_system_topics_unless_named(spark, cluster):
    b = cluster[0]
    topics = {r.topic for r in stored(spark, b).select("topic").distinct().collect()}
    assert topics == {"SrcA", "SrcB"}


def test_partitions_are_bounded_by_messages_and_bytes(spark, cluster):
    b = cluster[0]
    # SrcA: 600 messages over 4 queues (150 each), SrcB: 150 over 2 (75 each)
    assert live(spark, b, maxMessagesPerPartition=50).rdd.getNumPartitions() == 4 * 3 + 2 * 2
    assert stored(spark, b, maxMessagesPerPartition=50).rdd.getNumPartitions() == 4 * 3 + 2 * 2
    by_bytes = stored(spark, b, maxBytesPerPartition=4096)
    ranges = store.plan(store.open_stores([str(b.store_dir)]), Bounds(), 10**6, 4096)
    assert by_bytes.rdd.getNumPartitions() == len(ranges) > 40  # ~200 KiB of records
    assert by_bytes.count() == 750


def _second_wave_start(second) -> int:
    return min(s.queue_offset for s in second)


def test_time_filter_narrows_the_plan_and_selects_exactly(spark, cluster):
    b, first, second, _ = cluster
    rows = live(spark, b, topic="SrcA").collect()
    by_id = {r.msgId: r for r in rows}
    t = min(by_id[s.msg_id].storeTimestamp for s in second)
    assert max(by_id[s.msg_id].storeTimestamp for s in first) < t
    for df in (live(spark, b, topic="SrcA"), stored(spark, b)):
        got = df.where((F.col("topic") == "SrcA") & (F.col("storeTimestamp") >= F.lit(t))).collect()
        assert as_sent(got) == truth(second)
    t_ms = int(t.timestamp() * 1000)
    store_ranges = store.plan(store.open_stores([str(b.store_dir)]), Bounds(topics={"SrcA"}, time_lo_ms=t_ms),
                              10**6, 1 << 30)
    assert 200 <= sum(r.hi - r.lo for r in store_ranges) < 210  # a time bound is a search, not a scan
    o = source_options({"namesrv": b.namesrv_addr, "topic": "SrcA"}, streaming=False)
    live_ranges = live_plan(o, Bounds(topics={"SrcA"}, time_lo_ms=t_ms))
    assert 200 <= sum(r.hi - r.lo for r in live_ranges) <= 204  # nearest message: one early at most
    before = store.plan(store.open_stores([str(b.store_dir)]), Bounds(topics={"SrcA"}, time_hi_ms=t_ms - 1),
                        10**6, 1 << 30)
    assert 400 <= sum(r.hi - r.lo for r in before) < 410


def test_queue_and_offset_filters_are_exact(spark, cluster):
    b = cluster[0]
    for df in (live(spark, b), stored(spark, b)):
        q = df.where("topic = 'SrcB' and queueId = 1 and queueOffset >= 10 and queueOffset < 20")
        assert sorted(r.queueOffset for r in q.collect()) == list(range(10, 20))
        assert q.rdd.getNumPartitions() == 1
    none = live(spark, b).where("queueId in (7, 8)")
    assert none.count() == 0


def test_damaged_store_fails_with_the_place_or_skips_when_asked(spark, cluster, tmp_path):
    b = cluster[0]
    copy = tmp_path / "store"
    shutil.copytree(str(b.store_dir), copy, ignore=shutil.ignore_patterns("lock"))
    victim = stored(spark, b).where("topic = 'SrcB' and queueId = 0 and queueOffset = 5").collect()[0]
    log_files = sorted((copy / "commitlog").iterdir())
    size = log_files[0].stat().st_size
    path = log_files[victim.commitLogOffset // size]
    with open(path, "r+b") as f:  # break the record's magic code
        f.seek(victim.commitLogOffset % size + 4)
        f.write(struct.pack(">i", 0x12345678))
    df = spark.read.format("rmq").option("topic", "SrcB").load(str(copy))
    with pytest.raises(PythonException, match=r"SrcB@broker-a#0 offset 5: .*failOnDataLoss"):
        df.collect()
    kept = spark.read.format("rmq").option("topic", "SrcB").option("failOnDataLoss", "false").load(str(copy))
    got = kept.collect()
    assert len(got) == 149 and all(not (r.queueId == 0 and r.queueOffset == 5) for r in got)


def test_bad_options_fail_with_one_clear_message(spark, cluster, tmp_path):
    b = cluster[0]
    with pytest.raises(AnalysisException, match="give store directories"):
        spark.read.format("rmq").load().collect()
    with pytest.raises(AnalysisException, match="needs the topic option"):
        spark.read.format("rmq").option("namesrv", b.namesrv_addr).load().collect()
    with pytest.raises(AnalysisException, match="does not exist"):
        spark.read.format("rmq").load(str(tmp_path / "nothing")).collect()
    with pytest.raises(AnalysisException, match="maxMessagesPerPartition must be at least 1"):
        stored(spark, b, maxMessagesPerPartition=0).collect()
    with pytest.raises(AnalysisException, match="no broker .* serves topic NoSuchTopic"):
        live(spark, b, topic="NoSuchTopic").collect()


def test_sink_messages_are_read_back_by_the_consumer(spark, cluster):
    b = cluster[0]
    b.create_topic("SinkOut", 4)
    rows = [(f"body-{i}".encode() * (1 + i % 500), f"tag{i % 4}", [f"k{i}", f"x{i}"],
             {"n": str(i), "UNIQ_KEY": "dropped"}) for i in range(300)]
    df = spark.createDataFrame(rows, "body binary, tags string, keys array<string>, "
                                     "properties map<string,string>").repartition(3)
    (df.write.format("rmq").option("namesrv", b.namesrv_addr).option("topic", "SinkOut")
     .option("batchSize", "16").mode("append").save())
    got = consume(b.namesrv_addr, "SinkOut", 300)
    assert len(got) == 300
    assert {(m.body, m.tags, m.keys, m.properties["n"]) for m in got} == {
        (body, tags, " ".join(keys), props["n"]) for body, tags, keys, props in rows}
    assert len({m.msg_id for m in got}) == 300 and all(m.msg_id != "dropped" for m in got)


def test_sink_failures_fail_the_write(spark, cluster):
    b = cluster[0]
    empty = spark.createDataFrame([("SinkOut", b"")], "topic string, body binary")
    with pytest.raises(PythonException, match="empty body"):
        empty.write.format("rmq").option("namesrv", b.namesrv_addr).mode("append").save()
    rows = spark.createDataFrame([("SinkOut", b"x")], "topic string, body binary")
    nobody = f"127.0.0.1:{free_port()}"
    with pytest.raises(PythonException, match="not sent after 2 attempts"):
        (rows.write.format("rmq").option("namesrv", nobody).option("sendRetries", "1")
         .option("retryBackoffMs", "10").option("sendTimeoutMs", "500").mode("append").save())
    with pytest.raises(AnalysisException, match="need a body column"):
        spark.createDataFrame([("SinkOut",)], "topic string").write.format("rmq") \
            .option("namesrv", b.namesrv_addr).mode("append").save()


def test_store_read_sees_messages_once_dispatched(spark, cluster):
    """A store read of a live broker is a snapshot of its files."""
    b = cluster[0]
    produce(b.namesrv_addr, "SrcB", 10, 150)
    wait_until_blocking(lambda: stored(spark, b, topic="SrcB").count() == 160, 30, 0.2,
                        what="160 SrcB messages on disk")
