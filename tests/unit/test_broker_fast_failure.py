"""Request queues and BrokerFastFailure over a real RemotingServer: a request
that waits too long (or while the page cache is busy) is taken off the queue,
answered SYSTEM_BUSY with the 4.9.8 remark and never runs; a request that finds
a free worker runs at once."""

from __future__ import annotations

import asyncio

import pytest

from rmq.broker.fast_failure import BrokerFastFailure, QueuedProcessor, RequestQueue
from rmq.broker.put_delay import PutDelay
from rmq.remoting import RemotingClient, RemotingCommand, RemotingServer
from rmq.remoting.config import NettyServerConfig


class CountingProcessor:
    """Answers at once and counts the requests it actually ran."""

    def __init__(self) -> None:
        self.ran: list[int] = []

    def process_request(self, channel, request):
        self.ran.append(request.opaque)
        return RemotingCommand.create_response(0)


class Setup:
    def __init__(self, delay_ms: int, busy_timeout_ms: int, wait_limit_ms: float) -> None:
        self.delay = PutDelay(lambda: delay_ms, lambda: busy_timeout_ms)
        self.queue = RequestQueue("send", 100, workers=1, before_run=self.delay.hold,
                                  before_run_active=self.delay.active)
        self.processor = CountingProcessor()
        self.server = RemotingServer(NettyServerConfig(listenPort=0, bindAddress="127.0.0.1"))
        self.server.register_processor(10, QueuedProcessor(self.processor, self.queue), 100,
                                       pool="send")
        self.ff = BrokerFastFailure({"send": self.queue}, {"send": lambda: wait_limit_ms},
                                    self.delay.page_cache_busy, lambda: True)
        self.client = RemotingClient()

    async def __aenter__(self) -> Setup:
        await self.server.start()
        await self.ff.start()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.ff.shutdown()
        await self.client.close()
        await self.server.stop(0.1)

    async def send_many(self, n: int) -> list[RemotingCommand]:
        addr = f"127.0.0.1:{self.server.port}"
        return await asyncio.gather(*(
            self.client.invoke(addr, RemotingCommand.create_request(10), 5000)
            for _ in range(n)))


@pytest.mark.timeout(30)
async def test_waiting_requests_time_out_and_never_run():
    async with Setup(delay_ms=600, busy_timeout_ms=60000, wait_limit_ms=100) as s:
        responses = await s.send_many(5)
        ok = [r for r in responses if r.code == 0]
        busy = [r for r in responses if r.code == 2]
        assert len(ok) == 1 and len(busy) == 4
        for r in busy:
            assert r.remark.startswith("[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control "
                                       "for a while, period in queue: ")
            waited = int(r.remark.split("period in queue: ")[1].split("ms")[0])
            assert waited >= 100
        # only the request a worker took ran; the answered ones were removed unrun
        await asyncio.sleep(0.3)
        assert s.processor.ran == [ok[0].opaque]
        assert len(s.queue) == 0 and s.queue.busy == 0


@pytest.mark.timeout(30)
async def test_page_cache_busy_clears_send_queue():
    async with Setup(delay_ms=800, busy_timeout_ms=200, wait_limit_ms=60000) as s:
        responses = await s.send_many(4)
        codes = sorted(r.code for r in responses)
        assert codes == [0, 2, 2, 2]
        for r in responses:
            if r.code == 2:
                assert r.remark.startswith("[PCBUSY_CLEAN_QUEUE]broker busy")
        assert len(s.processor.ran) == 1


@pytest.mark.timeout(30)
async def test_free_worker_runs_inline():
    queue = RequestQueue("admin", None, workers=2)
    processor = CountingProcessor()
    request = RemotingCommand.create_request(10)
    result = QueuedProcessor(processor, queue).process_request(None, request)
    assert isinstance(result, RemotingCommand) and processor.ran == [request.opaque]
    assert len(queue) == 0 and queue.head_wait_ms() == 0


@pytest.mark.timeout(30)
async def test_queue_order_workers_and_head_wait():
    gate = asyncio.Event()

    async def before_run() -> None:
        await gate.wait()

    queue = RequestQueue("send", None, workers=2, before_run=before_run,
                         before_run_active=lambda: not gate.is_set())
    processor = CountingProcessor()
    qp = QueuedProcessor(processor, queue)
    requests = [RemotingCommand.create_request(10) for _ in range(5)]
    futures = [qp.process_request(None, r) for r in requests]
    await asyncio.sleep(0.05)
    # two workers hold a request each, three wait
    assert queue.busy == 2 and len(queue) == 3 and queue.head_wait_ms() >= 40
    gate.set()
    responses = await asyncio.gather(*futures)
    assert all(r.code == 0 for r in responses)
    assert processor.ran == [r.opaque for r in requests]  # oldest first
    await asyncio.sleep(0)
    assert queue.busy == 0 and len(queue) == 0


def test_put_delay_lock_time_and_busy():
    delay = PutDelay(lambda: 0, lambda: 1000)
    assert not delay.active() and delay.lock_time_ms() == 0 and not delay.page_cache_busy()


@pytest.mark.timeout(30)
async def test_checks_sleep_while_no_request_waits():
    """With every queue empty the 10 ms checks do not run (nothing to
    answer); a queued request wakes them, they expire it, and once the
    queues are empty again they sleep again."""
    async with Setup(delay_ms=400, busy_timeout_ms=60000, wait_limit_ms=100) as s:
        checks = []
        plain = s.ff.run_once
        s.ff.run_once = lambda: (checks.append(len(s.queue)), plain())[1]
        await asyncio.sleep(0.2)
        assert checks == []  # ~20 ticks of 10 ms slept through
        responses = await s.send_many(3)
        assert sorted(r.code for r in responses) == [0, 2, 2]  # the two waiting expired
        assert checks and checks[0] > 0
        await asyncio.sleep(0.05)
        ran = len(checks)
        await asyncio.sleep(0.2)
        assert len(checks) <= ran + 1  # asleep again (at most the tick under way)
