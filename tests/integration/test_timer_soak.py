"""Scale (``soak`` marker, not in the default run): millions of pending timers
keep the broker's anonymous memory bounded, because the timer wheel and the
timer log live in mapped files.

    RMQ_TIMER_SOAK_N=10000000 python -m pytest tests/integration/test_timer_soak.py -m soak

sends N timers (batches of 100, one due time per batch, due in an hour),
waits until the broker has taken them all into the wheel and reports the
broker's RssAnon and RssFile beside the files' sizes."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from rmq.client import Message, Producer
from rmq.testing.cluster import Cluster
from tests.integration.test_timer import scrape_metric

pytestmark = [pytest.mark.soak, pytest.mark.asyncio, pytest.mark.timeout(3600)]
N = int(os.environ.get("RMQ_TIMER_SOAK_N", "1000000"))
ANON_LIMIT_MB = 600


def rss_mb(pid: int) -> dict[str, float]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("RssAnon", "RssFile", "VmHWM")):
                k, v = line.split(":")
                out[k] = int(v.split()[0]) / 1024
    return out


async def test_millions_of_pending_timers_keep_anonymous_memory_bounded(tmp_path):
    from rmq.testing.procs import free_port

    prom = free_port()
    c = Cluster(tmp_path, f"mappedFileSizeCommitLog={256 * 1024 * 1024}\n"
                                   f"mappedFileSizeConsumeQueue={300000 * 20}\n"
                                   "metricsExporterType=PROM\nmetricsPromExporterHost=127.0.0.1\n"
                                   f"metricsPromExporterPort={prom}\n")
    try:
        c.start_broker()
        await c.wait_routable()
        await c.create_topic("TimerSoak", 4)
        cc = c.client_config("soak")
        due = int(time.time() * 1000) + 3_600_000
        t0 = time.monotonic()
        async with Producer("pg_timer_soak", client_config=cc) as p:
            async def one(i: int) -> None:
                await p.send_batch([Message("TimerSoak", b"s" * 16, deliver_time_ms=due + i % 3_000_000)
                                    for _ in range(100)])
            for start in range(0, N // 100, 64):
                await asyncio.gather(*(one(i) for i in range(start, min(start + 64, N // 100))))
        while await scrape_metric(prom, "rocketmq_timer_enqueue_total") < N:
            await asyncio.sleep(1)
        took = time.monotonic() - t0
        mem = rss_mb(c.broker.pid)
        root = tmp_path / "store-broker-a"
        log_mb = sum(f.stat().st_size for f in (root / "timerlog").iterdir()) / 2**20
        print(f"\n{N} pending timers in {took:.0f} s ({N / took:.0f}/s); broker RssAnon "
              f"{mem['RssAnon']:.0f} MB, RssFile {mem['RssFile']:.0f} MB, VmHWM {mem['VmHWM']:.0f} MB; "
              f"timerlog {log_mb:.0f} MB, timerwheel "
              f"{(root / 'timerwheel').stat().st_size / 2**20:.0f} MB")
        assert mem["RssAnon"] < ANON_LIMIT_MB
    finally:
        await c.close()
