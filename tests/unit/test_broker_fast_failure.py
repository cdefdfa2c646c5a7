"""BrokerFastFailure over a real RemotingServer: expired and page-cache-busy requests
are answered SYSTEM_BUSY with the 4.9.8 remarks; the late responses are dropped."""

from __future__ import annotations

import asyncio

import pytest

from rmq.broker.fast_failure import BrokerFastFailure, QueuedProcessor, RequestQueue
from rmq.remoting import RemotingClient, RemotingCommand, RemotingServer
from rmq.remoting.config import NettyServerConfig


class SlowProcessor:
    """Stands in for a send whose store put is slow."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def process_request(self, channel, request):
        await asyncio.sleep(self.delay)
        return RemotingCommand.create_response(0)


async def run_server(busy: bool, wait_limit_ms: float):
    queue = RequestQueue("send", 100)
    server = RemotingServer(NettyServerConfig(listenPort=0, bindAddress="127.0.0.1"))
    server.register_processor(10, QueuedProcessor(SlowProcessor(1.0), queue), 100, pool="send")
    ff = BrokerFastFailure({"send": queue}, {"send": lambda: wait_limit_ms}, lambda: busy,
                           lambda: True)
    await server.start()
    await ff.start()
    return server, ff, queue


@pytest.mark.timeout(30)
async def test_expired_send_answered_timeout_clean_queue():
    server, ff, queue = await run_server(busy=False, wait_limit_ms=100)
    client = RemotingClient()
    try:
        resp = await client.invoke(f"127.0.0.1:{server.port}",
                                   RemotingCommand.create_request(10), 5000)
        assert resp.code == 2
        assert resp.remark.startswith("[TIMEOUT_CLEAN_QUEUE]broker busy")
        assert len(queue) == 0
    finally:
        await ff.shutdown()
        await client.close()
        await server.stop(0.1)


@pytest.mark.timeout(30)
async def test_page_cache_busy_clears_send_queue():
    server, ff, queue = await run_server(busy=True, wait_limit_ms=60000)
    client = RemotingClient()
    try:
        resp = await client.invoke(f"127.0.0.1:{server.port}",
                                   RemotingCommand.create_request(10), 5000)
        assert resp.code == 2 and resp.remark.startswith("[PCBUSY_CLEAN_QUEUE]")
    finally:
        await ff.shutdown()
        await client.close()
        await server.stop(0.1)


def test_head_wait_and_size():
    queue = RequestQueue("pull", 10)
    assert queue.head_wait_ms() == 0 and len(queue) == 0
