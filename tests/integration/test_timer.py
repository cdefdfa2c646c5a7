"""RocketMQ 5 timer messages against real rmq-namesrv / rmq-broker processes:
TIMER_DELIVER_MS / TIMER_DELAY_MS / TIMER_DELAY_SEC on single, batch and
transactional sends, delivered never before their time and at most one
``timerPrecisionMs`` after it; a time in the past at once; too far refused with
5.3.3's code and remark; a graceful restart and a SIGKILL lose none and
deliver none twice."""

from __future__ import annotations

import asyncio
import collections
import os
import time
import urllib.request

import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from rmq.client import LocalTransactionState, Message, MQClientError, Producer, TransactionProducer
from rmq.client.codec import decode_messages
from rmq.common.codes import ResponseCode
from rmq.remoting.exceptions import RemotingError
from rmq.testing.cluster import Cluster
from rmq.testing.messaging import running_cluster
from rmq.testing.procs import free_port
from rmq.testing.wait import wait_until
from tests.integration.test_messaging_raw import pull

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(90)]
PRECISION = 100
PROM_PORT = free_port(keep=True)  # (bound when the module runs)
CONF = (f"timerPrecisionMs={PRECISION}\nmappedFileSizeTimerLog={1024 * 1024}\n"
        "timerMaxDelaySec=60\nmetricsExporterType=PROM\nmetricsPromExporterHost=127.0.0.1\n"
        f"metricsPromExporterPort={PROM_PORT}\n")
# a timer is due at T; it is stored between T and T + precision (plus the
# scheduling slack of a loaded shared test machine)
SLACK_MS = 400


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory):
    async with running_cluster(tmp_path_factory.mktemp("timer"), CONF) as c:
        yield c


def new_producer(c: Cluster, group: str) -> Producer:
    cc = c.client_config(group)
    cc.heartbeat_broker_interval = 500
    return Producer(group, client_config=cc)


async def visible(c: Cluster, topic: str, queue_id: int = 0) -> list:
    out: list = []
    offset = 0
    while True:
        try:
            r = await pull(c, topic, queue_id, offset, max_nums=32)
        except RemotingError:  # the connection of a previous broker run
            return out
        if r.code != ResponseCode.SUCCESS:
            return out
        msgs = decode_messages(r.body)
        if not msgs:
            return out
        out.extend(msgs)
        offset = msgs[-1].queue_offset + 1


async def wait_count(c: Cluster, topic: str, n: int, timeout: float = 20.0) -> list:
    """The messages of ``topic`` once at least ``n`` are visible."""
    async def enough() -> list:
        got = await visible(c, topic)
        assert len(got) >= n, f"{topic}: {len(got)}/{n} delivered"
        return got
    return await wait_until(enough, timeout)


async def scrape_metric(port: int, name: str) -> float:
    """The sum of a metric's samples on the broker's Prometheus endpoint."""
    def get() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            return r.read().decode()
    text = await asyncio.to_thread(get)
    return sum(s.value for fam in text_string_to_metric_families(text)
               for s in fam.samples if s.name == name)


def assert_on_time(msg, due_ms: int) -> None:
    """Stored under its real topic not before ``due_ms``, not after due + precision."""
    late = msg.store_timestamp - due_ms
    assert late >= 0, f"delivered {-late} ms early"
    assert late <= PRECISION + SLACK_MS, f"delivered {late} ms late"


async def test_deliver_time_delay_ms_and_delay_sec_on_time(cluster):
    await cluster.create_topic("TimerA", 1)
    async with new_producer(cluster, "pg_timer_a") as p:
        base = now_ms()
        due1 = base + 1234
        r1 = await p.send(Message("TimerA", b"deliver", tags="t1"), deliver_time_ms=due1)
        t2 = now_ms()
        await p.send(Message("TimerA", b"delay-ms"), delay_ms=1500)
        t3 = now_ms()
        await p.send(Message("TimerA", b"delay-sec", delay_sec=1))
        due_aligned = (base // 1000 + 2) * 1000  # on a precision boundary
        await p.send(Message("TimerA", b"aligned"), deliver_time_ms=due_aligned)
    assert r1.message_queue.topic == "TimerA"
    assert await visible(cluster, "TimerA") == []  # nothing before its time
    got = {m.body: m for m in await wait_count(cluster, "TimerA", 4, timeout=10)}
    assert_on_time(got[b"deliver"], due1)
    assert got[b"deliver"].tags == "t1" and got[b"deliver"].msg_id == r1.msg_id
    props = got[b"deliver"].properties
    # its slot: the due time rounded down to the precision, the slot before
    # when it lies on a boundary (5.3.3's HookUtils; one base in a hundred)
    assert props["TIMER_OUT_MS"] == str((due1 - 1) // PRECISION * PRECISION)
    assert props["REAL_TOPIC"] == "TimerA" and "TIMER_ENQUEUE_MS" in props
    assert "TIMER_DEQUEUE_MS" in props
    # the broker's clock started the delays; the send returned after it
    assert got[b"delay-ms"].store_timestamp >= t2 + 1500 - 50
    assert got[b"delay-ms"].store_timestamp <= t3 + 1500 + PRECISION + SLACK_MS
    assert got[b"delay-sec"].store_timestamp >= t3 + 1000 - 50
    assert_on_time(got[b"aligned"], due_aligned)
    assert got[b"aligned"].properties["TIMER_OUT_MS"] == str(due_aligned - PRECISION)


async def test_past_time_is_delivered_at_once(cluster):
    await cluster.create_topic("TimerPast", 1)
    async with new_producer(cluster, "pg_timer_past") as p:
        await p.send(Message("TimerPast", b"past"), deliver_time_ms=now_ms() - 60_000)
    (m,) = await wait_count(cluster, "TimerPast", 1, timeout=5)
    assert m.body == b"past" and "TIMER_OUT_MS" not in m.properties  # never parked


async def test_too_far_and_malformed_are_refused_with_5_3_3_answers(cluster):
    await cluster.create_topic("TimerFar", 1)
    async with new_producer(cluster, "pg_timer_far") as p:
        with pytest.raises(MQClientError) as e:
            await p.send(Message("TimerFar", b"far"), delay_ms=61_000)
        assert e.value.code == ResponseCode.MESSAGE_ILLEGAL
        assert "timer message illegal, the delay time should not be bigger than the max delay " \
               "60000ms" in str(e.value)
        with pytest.raises(MQClientError) as e:
            await p.send(Message("TimerFar", b"bad", properties={"TIMER_DELAY_MS": "12x"}))
        assert e.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert await visible(cluster, "TimerFar") == []


async def test_delay_level_wins_over_timer_properties(cluster):
    await cluster.create_topic("TimerLevel", 1)
    async with new_producer(cluster, "pg_timer_level") as p:
        await p.send(Message("TimerLevel", b"lvl", delay_level=1, delay_ms=30_000))
    (m,) = await wait_count(cluster, "TimerLevel", 1, timeout=5)
    assert "TIMER_DELAY_MS" not in m.properties and m.properties["REAL_TOPIC"] == "TimerLevel"


async def test_batch_with_timer(cluster):
    await cluster.create_topic("TimerBatch", 1)
    due = now_ms() + 1000
    async with new_producer(cluster, "pg_timer_batch") as p:
        await p.send_batch([Message("TimerBatch", b"b%d" % i, deliver_time_ms=due)
                            for i in range(5)])
        with pytest.raises(MQClientError):
            await p.send_batch([Message("TimerBatch", b"x", delay_ms=1000),
                                Message("TimerBatch", b"y", delay_ms=2000)])
    assert await visible(cluster, "TimerBatch") == []
    got = await wait_count(cluster, "TimerBatch", 5, timeout=10)
    assert sorted(m.body for m in got) == [b"b%d" % i for i in range(5)]
    for m in got:
        assert_on_time(m, due)


class _Commit:
    def execute_local_transaction(self, msg, arg):
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, msg):
        return LocalTransactionState.COMMIT_MESSAGE


async def test_transactional_commit_with_timer(cluster):
    await cluster.create_topic("TimerTx", 1)
    cc = cluster.client_config("pg_timer_tx")
    due = now_ms() + 1500
    async with TransactionProducer("pg_timer_tx", listener=_Commit(), client_config=cc) as p:
        r = await p.send_message_in_transaction(Message("TimerTx", b"tx", deliver_time_ms=due))
        assert r.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE
        await asyncio.sleep(0.3)
        assert await visible(cluster, "TimerTx") == []
        (m,) = await wait_count(cluster, "TimerTx", 1, timeout=10)
    assert_on_time(m, due)


def _counts(msgs) -> collections.Counter:
    return collections.Counter(m.body for m in msgs)


async def test_graceful_restart_delivers_once(cluster):
    await cluster.create_topic("TimerRestart", 1)
    due = now_ms() + 1500
    bodies = [b"g%03d" % i for i in range(50)]
    async with new_producer(cluster, "pg_timer_restart") as p:
        for i, b in enumerate(bodies):
            await p.send(Message("TimerRestart", b), deliver_time_ms=due + i * 40)
    assert cluster.broker.stop() == 0
    # due while down, others after the restart
    await asyncio.sleep(max(0.0, (due - now_ms()) / 1000) + 0.5)
    cluster.start_broker()
    await cluster.wait_routable("TimerRestart")
    got = await wait_count(cluster, "TimerRestart", len(bodies), timeout=20)
    await asyncio.sleep(1.0)
    got = await visible(cluster, "TimerRestart")
    counts = _counts(got)
    assert sorted(counts) == bodies and set(counts.values()) == {1}


async def test_sigkill_during_delivery_loses_none_and_repeats_none(cluster):
    """3000 timers of one slot: the broker is killed while it stores them
    (some visible, not all), so the restarted one finds its round cut short."""
    await cluster.create_topic("TimerKill", 1)
    n, per_batch = 3000, 100
    due = now_ms() + 2500
    async with new_producer(cluster, "pg_timer_kill") as p:
        await asyncio.gather(*(
            p.send_batch([Message("TimerKill", b"k%04d" % (b * per_batch + i), deliver_time_ms=due)
                          for i in range(per_batch)]) for b in range(n // per_batch)))

    async def delivering() -> bool:
        return (await pull(cluster, "TimerKill", 0, 0, max_nums=1)).code == ResponseCode.SUCCESS
    await wait_until(delivering, 10, 0.002, "delivery started")
    cluster.broker.kill()
    cluster.start_broker()
    await cluster.wait_routable("TimerKill")
    await wait_count(cluster, "TimerKill", n, timeout=30)
    await asyncio.sleep(1.0)
    counts = _counts(await visible(cluster, "TimerKill"))
    assert len(counts) == n, f"{n - len(counts)} timers lost"
    twice = [b for b, k in counts.items() if k > 1]
    assert not twice, f"{len(twice)} delivered twice"
    logs = cluster.tmp / "logs" / "rocketmqlogs"
    text = "".join(p.read_text(errors="replace") for p in logs.glob("*.log"))
    assert "was cut short" in text  # the kill did land inside the slot's delivery
    assert (await timing_counts(cluster)).get("TimerKill", 0) == 0  # none left pending


async def timing_counts(c: Cluster) -> dict[str, int]:
    """GET_TIMER_METRICS: the broker's pending timers per topic."""
    from rmq.common import fastjson
    from rmq.common.codes import RequestCode

    r = await c.call(RequestCode.GET_TIMER_METRICS)
    assert r.code == 0, r.remark
    return {t: m["count"] for t, m in fastjson.loads(bytes(r.body))["timingCount"].items()}


async def test_sigkill_counts_pending_timers_again(tmp_path):
    """The counts file is written once a flush interval (10 min here: never
    before the kill); the restarted broker counts the pending timers again
    from the timer log."""
    c = Cluster(tmp_path, CONF.replace(f"metricsPromExporterPort={PROM_PORT}\n", "")
                         .replace("metricsExporterType=PROM\n", "") +
                         "timerFlushIntervalMs=600000\n")
    try:
        c.start_broker()
        await c.wait_routable()
        await c.create_topic("TimerRevA", 1)
        await c.create_topic("TimerRevB", 1)
        async with new_producer(c, "pg_timer_rev") as p:
            for i in range(20):
                await p.send(Message("TimerRevA", b"a%d" % i), delay_ms=50_000)
            for i in range(5):
                await p.send(Message("TimerRevB", b"b%d" % i), delay_ms=300)
        await wait_count(c, "TimerRevB", 5)
        deadline = time.monotonic() + 10
        while (counts := await timing_counts(c)) != {"TimerRevA": 20, "TimerRevB": 0}:
            assert time.monotonic() < deadline, counts
            await asyncio.sleep(0.05)
        c.broker.kill()
        c.start_broker()
        await c.wait_routable("TimerRevA")
        counts = await timing_counts(c)
        assert counts["TimerRevA"] == 20 and counts.get("TimerRevB", 0) == 0, counts
    finally:
        await c.close()


async def test_timer_files_exist_with_5_3_3_names(cluster):
    root = cluster.tmp / "store-broker-a"
    assert os.path.getsize(root / "timerwheel") == 7 * 86400 * 2 * 32
    assert os.path.getsize(root / "config" / "timercheck") == 4096
    assert sorted(os.listdir(root / "timerlog"))[0] == "0" * 20
    await wait_until(lambda: (root / "config" / "timermetrics").exists(), 5)


async def test_prometheus_timer_metrics(cluster):
    await cluster.create_topic("TimerProm", 1)
    async with new_producer(cluster, "pg_timer_prom") as p:
        for i in range(3):
            await p.send(Message("TimerProm", b"p%d" % i), delay_ms=300)
        await p.send(Message("TimerProm", b"later"), delay_ms=50_000)
    await wait_count(cluster, "TimerProm", 3, timeout=10)

    def get() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{PROM_PORT}/metrics", timeout=10) as r:
            return r.read().decode()
    text = await asyncio.to_thread(get)
    found = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            found[(s.name, s.labels.get("topic"))] = s.value
    assert found[("rocketmq_timer_dequeue_total", "TimerProm")] == 3
    assert found[("rocketmq_timer_enqueue_total", "TimerProm")] == 4
    assert found[("rocketmq_timing_messages", "TimerProm")] == 1  # the one due in 50 s
    for gauge in ("rocketmq_timer_enqueue_lag", "rocketmq_timer_enqueue_latency",
                  "rocketmq_timer_dequeue_lag", "rocketmq_timer_dequeue_latency"):
        assert found[(gauge, None)] >= 0


async def test_runtime_info_has_5_3_3_timer_keys(cluster):
    from rmq.common import fastjson
    from rmq.common.codes import RequestCode

    r = await cluster.call(RequestCode.GET_BROKER_RUNTIME_INFO)
    table = fastjson.loads(bytes(r.body))["table"]
    assert int(table["timerOffsetBehind"]) == 0 and int(table["timerReadBehind"]) == 0
    assert int(table["timerCongestNum"]) >= 1  # the TimerProm timer due in 50 s
    float(table["timerEnqueueTps"]), float(table["timerDequeueTps"])


async def test_timer_checkpoint_and_metrics_requests(cluster):
    from rmq.common import fastjson
    from rmq.common.codes import RequestCode
    from rmq.store.timer import layout as L

    r = await cluster.call(RequestCode.GET_TIMER_CHECK_POINT)
    assert r.code == 0 and len(r.body) == 56
    cp = L.unpack_checkpoint(bytes(r.body))
    assert cp.last_read_time_ms > 0 and cp.last_timer_queue_offset > 0
    r = await cluster.call(RequestCode.GET_TIMER_METRICS)
    assert r.code == 0
    counts = fastjson.loads(bytes(r.body))["timingCount"]
    assert counts["TimerProm"]["count"] == 1  # the one due in 50 s


async def test_timer_topic_is_a_system_topic(cluster):
    from rmq.common import fastjson
    from rmq.common.codes import RequestCode

    r = await cluster.call(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
    assert "rmq_sys_wheel_timer" in fastjson.loads(bytes(r.body))["topicList"]


async def test_web_console_shows_the_timer_figures(cluster):
    from rmq.tools.dashboard.service import DashboardService

    svc = DashboardService(cluster.namesrv_addr)
    try:
        (row,) = (await svc.cluster())["brokers"]
    finally:
        await svc.close()
    assert row["timerPending"] >= 1 and row["timerBacklog"] == 0 and row["timerBehind"] == 0
