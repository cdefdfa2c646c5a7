"""``rocketmq_timer_message_snapshot`` from a real rmq-broker's Prometheus
exporter: timers sent at several delays land in 5.3.3's ``timer_bound_s``
buckets (5 s, 1 min, 5 min, 15 min, 1 h, 4 h, 8 h, 24 h from now, each
excluding the one before), a timer due beyond 24 h in none, and a delivered
timer leaves its bucket."""

from __future__ import annotations

import asyncio
import urllib.request

import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from rmq.client import Message, Producer
from rmq.testing.messaging import running_cluster
from rmq.testing.procs import free_port
from rmq.testing.wait import wait_until

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(90)]
PROM_PORT = free_port(keep=True)  # (bound when the module runs)
CONF = ("metricsExporterType=PROM\nmetricsPromExporterHost=127.0.0.1\n"
        f"metricsPromExporterPort={PROM_PORT}\n")  # timerPrecisionMs: 5.3.3's 1000
TOPIC = "TimerSnap"
# delay (s) -> how many timers; far from every bucket bound so that the few
# seconds between sending and scraping cannot move one across a bound
DELAYS = {3: 2, 30: 1, 200: 3, 600: 1, 2000: 1, 10_000: 1, 20_000: 1, 50_000: 2, 100_000: 1}
EXPECTED = {"5": 2, "60": 1, "300": 3, "900": 1, "3600": 1, "14400": 1, "28800": 1,
            "86400": 2}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory):
    async with running_cluster(tmp_path_factory.mktemp("timer_snap"), CONF) as c:
        yield c


async def scrape() -> dict:
    """{(sample name, timer_bound_s or topic): (value, labels)}."""
    def get() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{PROM_PORT}/metrics", timeout=10) as r:
            return r.read().decode()
    found = {}
    for fam in text_string_to_metric_families(await asyncio.to_thread(get)):
        for s in fam.samples:
            key = s.labels.get("timer_bound_s") or s.labels.get("topic")
            found[(s.name, key)] = (s.value, s.labels)
    return found


def snapshot(found: dict) -> dict:
    return {k: int(v) for (name, k), (v, _labels) in found.items()
            if name == "rocketmq_timer_message_snapshot"}


async def test_snapshot_buckets_follow_the_wheel(cluster):
    await cluster.create_topic(TOPIC, 1)
    cc = cluster.client_config("pg_timer_snap")
    async with Producer("pg_timer_snap", client_config=cc) as p:
        for delay, n in DELAYS.items():
            for i in range(n):
                await p.send(Message(TOPIC, b"%d-%d" % (delay, i)), delay_ms=delay * 1000)
    total = sum(DELAYS.values())

    async def enqueued() -> bool:
        found = await scrape()
        return found.get(("rocketmq_timer_enqueue_total", TOPIC), (0,))[0] == total
    await wait_until(enqueued, 10)
    found = await scrape()
    assert snapshot(found) == EXPECTED
    _value, labels = found[("rocketmq_timer_message_snapshot", "5")]
    assert labels["storage_type"] == "local" and labels["storage_medium"] == "disk"
    assert labels["node_type"] == "broker" and labels["cluster"]
    assert found[("rocketmq_timing_messages", TOPIC)][0] == total

    async def first_delivered() -> bool:
        found = await scrape()
        return found.get(("rocketmq_timer_dequeue_total", TOPIC), (0,))[0] == 2
    await wait_until(first_delivered, 15)
    assert snapshot(await scrape()) == {**EXPECTED, "5": 0}
