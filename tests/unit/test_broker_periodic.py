"""PeriodicService / ScheduledTask (rmq.common.periodic): timing of the first
and later steps, periods read afresh, failures logged without ending the loop,
async steps awaited, shutdown idempotent."""

from __future__ import annotations

import asyncio
import logging

import pytest

from rmq.common.periodic import PeriodicService, ScheduledTask

pytestmark = pytest.mark.timeout(20)


class Counter(PeriodicService):
    interval_s = 0.02
    failure_message = "counter step failed"

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def run_once(self) -> None:
        self.calls += 1


async def test_subclass_runs_every_interval_and_stops_on_shutdown() -> None:
    svc = Counter()
    await svc.start()
    await asyncio.sleep(0.3)
    await svc.shutdown()
    seen = svc.calls
    assert seen >= 3
    await asyncio.sleep(0.1)
    assert svc.calls == seen
    await svc.shutdown()  # a second shutdown is harmless


async def test_first_step_waits_for_the_initial_delay() -> None:
    calls: list[float] = []
    loop = asyncio.get_running_loop()
    started = loop.time()
    task = ScheduledTask("t", 0.2, lambda: 0.01, lambda: calls.append(loop.time()))
    await task.start()
    await asyncio.sleep(0.1)
    assert calls == []
    await asyncio.sleep(0.4)
    await task.shutdown()
    assert calls and calls[0] - started >= 0.19
    assert len(calls) >= 3


async def test_period_is_read_each_time() -> None:
    period = [10.0]
    calls: list[int] = []
    task = ScheduledTask("t", 0.0, lambda: period[0], lambda: calls.append(1))
    await task.start()
    await asyncio.sleep(0.05)
    assert len(calls) == 1          # waiting out the long period now
    await task.shutdown()
    period[0] = 0.01
    await task.start()
    await asyncio.sleep(0.3)
    await task.shutdown()
    assert len(calls) >= 4


async def test_failing_step_is_logged_and_the_loop_goes_on(caplog) -> None:
    calls: list[int] = []

    def flaky() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("boom")

    logger = logging.getLogger("rmq.test.periodic")
    task = ScheduledTask("flaky", 0.0, lambda: 0.02, flaky, logger)
    with caplog.at_level(logging.ERROR, logger="rmq.test.periodic"):
        await task.start()
        await asyncio.sleep(0.3)
        await task.shutdown()
    assert len(calls) >= 3
    failures = [r for r in caplog.records if r.name == "rmq.test.periodic"]
    assert len(failures) == 1
    assert failures[0].getMessage() == "scheduled task flaky failed"
    assert failures[0].exc_info[0] is RuntimeError


async def test_async_steps_are_awaited() -> None:
    done: list[int] = []

    async def step() -> None:
        await asyncio.sleep(0.01)
        done.append(1)

    task = ScheduledTask("async", 0.0, lambda: 0.02, step)
    await task.start()
    await asyncio.sleep(0.3)
    await task.shutdown()
    assert len(done) >= 3
