"""The ``rmq`` data source as a micro-batch stream against a real broker: each
message reaches the sink exactly once through a restart of the query and a
kill -9 of the broker; offsets are per queue and start where asked; new
queues are picked up; the group's offsets reach the broker; a stream copies
a topic into another through the streaming sink."""

from __future__ import annotations

import json
import threading
import time

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from rmq.client.message import MessageQueue
from rmq.testing.procs import run_cli
from spark.source.cluster import DataLossError, pulled
from spark.source.options import source_options
from spark.source.stream import RmqStreamReader, flatten
from tests.spark.source_support import consume, produce, running_broker, wait_until_blocking

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_broker(tmp_path_factory.mktemp("stream")) as b:
        yield b


def stream(spark, b, topic, **options):
    r = (spark.readStream.format("rmq").option("namesrv", b.namesrv_addr).option("topic", topic)
         .option("startingOffsets", "earliest").option("retryTimeoutMs", "60000"))
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load()


def to_parquet(df, out, checkpoint, **trigger):
    return (df.writeStream.format("parquet").option("path", str(out))
            .option("checkpointLocation", str(checkpoint)).trigger(**trigger).start())


class Query:
    """A streaming query that is started again from its checkpoint when Spark gave
    up waiting for its Python worker: the JVM waits a fixed 10 s for the worker to
    connect back, which a loaded machine can exceed.  Any other stop fails."""

    WORKER_LATE = "Python worker failed to connect back"

    def __init__(self, start) -> None:
        self.start, self.restarts = start, 0
        self.q = start()

    def check(self) -> None:
        if self.q.isActive:
            return
        error = self.q.exception()
        if error is None or self.WORKER_LATE not in str(error) or self.restarts >= 3:
            raise AssertionError(f"the query stopped: {error}")
        self.restarts += 1
        self.q = self.start()


def written(spark, out) -> int:
    try:
        return spark.read.parquet(str(out)).count()
    except Exception:  # nothing committed yet
        return 0


def test_each_message_once_through_query_restart_and_broker_kill(spark, cluster, tmp_path):
    b = cluster
    b.create_topic("StrA", 4)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    sent = produce(b.namesrv_addr, "StrA", 300)
    query = Query(lambda: to_parquet(
        stream(spark, b, "StrA", maxOffsetsPerTrigger=100, group="spark-stream-g"),
        out, ckpt, processingTime="0.5 seconds"))
    try:
        wait_until_blocking(lambda: query.check() or written(spark, out) == 300, 90, 0.2,
                            what="the first 300 messages")
        assert max(p["numInputRows"] for p in query.q.recentProgress) <= 100
        b.broker.kill()  # SIGKILL: the query keeps triggering while the broker is gone
        time.sleep(2)
        assert query.q.isActive, query.q.exception()
        b.start()
        sent += produce(b.namesrv_addr, "StrA", 200, 300)
        wait_until_blocking(lambda: query.check() or written(spark, out) >= 500, 120, 0.2,
                            what="500 messages after the broker came back")
    finally:
        query.q.stop()
    sent += produce(b.namesrv_addr, "StrA", 100, 500)
    again = to_parquet(stream(spark, b, "StrA", group="spark-stream-g"), out, ckpt, availableNow=True)
    assert again.awaitTermination(120)
    rows = spark.read.parquet(str(out)).select("msgId", "body", "queueId", "queueOffset").collect()
    assert len(rows) == 600
    assert {(r.msgId, bytes(r.body)) for r in rows} == {(s.msg_id, s.body) for s in sent}

    shown = run_cli("rmq.tools.admin", ["consumerProgress", "-n", b.namesrv_addr, "-g",
                                         "spark-stream-g", "-t", "StrA", "--json"])
    assert shown.returncode == 0, shown.stderr
    rows = json.loads(shown.stdout)
    assert len(rows) == 4 and sum(r["consumerOffset"] for r in rows) == 600
    assert all(r["diff"] == 0 for r in rows), rows


def test_streaming_sink_copies_a_topic(spark, cluster, tmp_path):
    b = cluster
    b.create_topic("StrB", 2)
    b.create_topic("StrCopy", 4)
    sent = produce(b.namesrv_addr, "StrB", 200)
    df = stream(spark, b, "StrB").select("body", "tags", "keys", "properties")
    q = (df.writeStream.format("rmq").option("namesrv", b.namesrv_addr).option("topic", "StrCopy")
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    assert q.awaitTermination(120)
    got = consume(b.namesrv_addr, "StrCopy", 200)
    assert sorted((m.body, m.tags, m.keys, m.properties["seq"]) for m in got) == sorted(
        (s.body, s.tags, s.keys, dict(s.props)["seq"]) for s in sent)


def reader(b, topic, **options) -> RmqStreamReader:
    o = {"namesrv": b.namesrv_addr, "topic": topic, **{k: str(v) for k, v in options.items()}}
    return RmqStreamReader(source_options(o, streaming=True))


def test_offsets_start_where_asked_and_follow_new_queues(cluster):
    b = cluster
    b.create_topic("StrC", 4)
    first = produce(b.namesrv_addr, "StrC", 100)
    time.sleep(0.05)
    second = produce(b.namesrv_addr, "StrC", 100, 100)
    highs = {}
    for s in first + second:
        highs[s.queue_id] = max(highs.get(s.queue_id, 0), s.queue_offset + 1)

    def per_queue(table):
        return {mq.queue_id: off for mq, off in flatten(table).items()}

    assert per_queue(reader(b, "StrC", startingOffsets="earliest").initialOffset()) == dict.fromkeys(highs, 0)
    assert per_queue(reader(b, "StrC").initialOffset()) == highs  # latest by default
    spec = '{"StrC": {"broker-a": {"0": 5, "1": -1}}}'
    assert per_queue(reader(b, "StrC", startingOffsets=spec).initialOffset()) == {0: 5, 1: highs[1], 2: 0, 3: 0}
    stored_at = {m.msg_id: m.store_timestamp for m in consume(b.namesrv_addr, "StrC", 200)}
    t = min(stored_at[s.msg_id] for s in second)
    assert max(stored_at[s.msg_id] for s in first) < t
    want = {q: min(s.queue_offset for s in second if s.queue_id == q) for q in highs}
    assert per_queue(reader(b, "StrC", startingTimestamp=t).initialOffset()) == want

    r = reader(b, "StrC", startingOffsets="earliest", maxMessagesPerPartition=20)
    start = r.initialOffset()
    assert isinstance(r.getDefaultReadLimit(), ReadAllAvailable)
    capped = r.latestOffset(start, ReadMaxRows(50))
    assert sum(per_queue(capped).values()) == 50
    assert all(0 <= n <= highs[q] for q, n in per_queue(capped).items())
    parts = r.partitions(start, capped)
    rows = [row for p in parts for batch in r.read(p) for row in batch.to_pylist()]
    assert sorted((x["queueId"], x["queueOffset"]) for x in rows) == sorted(
        (q, o) for q, n in per_queue(capped).items() for o in range(n))
    assert all(p.hi - p.lo <= 20 for p in parts)

    r.prepareForTriggerAvailableNow()
    b.create_topic("StrC", 6)  # two more queues, and messages after the AvailableNow snapshot
    late = produce(b.namesrv_addr, "StrC", 60, 200)
    capped_now = per_queue(r.latestOffset(capped, ReadAllAvailable()))
    assert capped_now == {**highs, 4: 0, 5: 0}  # nothing past the snapshot; new queues wait
    fresh = reader(b, "StrC", startingOffsets="earliest")
    end = per_queue(fresh.latestOffset(start, ReadAllAvailable()))
    assert set(end) == set(range(6))
    assert sum(end.values()) == 260 and sum(1 for s in late if s.queue_id >= 4) == end[4] + end[5]

    with running_broker(b.tmp, "broker-b", joining=b) as other:  # a broker joins the topic
        other.create_topic("StrC", 2)
        joined = produce(b.namesrv_addr, "StrC", 40, 260)
        grown = flatten(fresh.latestOffset(start, ReadAllAvailable()))
        on_b = {mq.queue_id: off for mq, off in grown.items() if mq.broker_name == "broker-b"}
        assert on_b == {q: sum(1 for s in joined if s.broker == "broker-b" and s.queue_id == q)
                        for q in (0, 1)}
        assert sum(grown.values()) == 300


def test_pulls_wait_for_a_restarting_broker(cluster):
    """A range read while its broker is down goes on once the broker is back."""
    b = cluster
    b.create_topic("StrD", 1)
    sent = produce(b.namesrv_addr, "StrD", 50)
    b.broker.kill()
    got: list = []
    mq = MessageQueue("StrD", "broker-a", 0)
    reading = threading.Thread(target=lambda: got.extend(
        pulled(b.namesrv_addr, "spark-test", 3000, mq, 0, 50, 8, True, 60_000)))
    reading.start()
    time.sleep(1.5)
    assert reading.is_alive() and not got
    b.start()
    reading.join(60)
    assert not reading.is_alive()
    assert [m.msg_id for batch in got for m in batch] == [s.msg_id for s in sent]
    lost = pulled(b.namesrv_addr, "spark-test", 3000, mq, 40, 60, 8, True, 500)
    with pytest.raises(DataLossError, match=r"offsets \[50, 60\) of StrD@broker-a#0"):
        list(lost)
