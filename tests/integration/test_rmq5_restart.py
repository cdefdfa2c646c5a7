"""A running 5.x SimpleConsumer (Apache's official Python client 5.1.2) under a
broker SIGKILL and restart on the same store and ports: it keeps receiving
without reopening its Telemetry stream (the 5.1.2 client resends its Settings
only every 300 s), every message sent before and after the crash is received
and acked, no receive fails with INTERNAL_SERVER_ERROR, and the consumer is
registered again under its group."""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading

import pytest

from rmq.common import fastjson
from rmq.common.codes import RequestCode as R
from rmq.common.codes import ResponseCode
from rmq.remoting import RemotingClient
from rmq.testing.procs import wait_port
from tests.integration.test_rmq5_consumer import CLIENT, GROUP, send_n
from tests.integration.test_rmq5_producer import TOPIC, cluster  # noqa: F401 (fixture)

pytestmark = [pytest.mark.once, pytest.mark.timeout(240)]


class Lines:
    """The client's JSON lines, read as they come."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.items: list[dict] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.items.append(json.loads(line))

    def acked(self) -> set[str]:
        return {x["body"] for x in list(self.items) if "acked" in x}

    async def until(self, predicate, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not predicate():
            assert self.proc.poll() is None or predicate(), self.items[-20:]
            assert loop.time() < deadline, self.items[-20:]
            await asyncio.sleep(0.2)


async def test_simple_consumer_keeps_receiving_across_a_broker_sigkill(cluster):  # noqa: F811
    c = cluster
    proc = subprocess.Popen([str(c.python), str(CLIENT), f"127.0.0.1:{c.grpc_port}", "keep",
                             TOPIC, GROUP, "9"], stdout=subprocess.PIPE, text=True)
    lines = Lines(proc)
    try:
        await asyncio.sleep(3)  # its first receives reach the empty queues first
        before = await send_n(c, 4, "Before")
        await lines.until(lambda: lines.acked() >= set(before), 60)
        mark = len(lines.items)
        c.broker.kill()
        c.start_broker()
        wait_port(c.grpc_port, timeout=20)
        await c.client.close()  # its connection died with the broker
        c.client = RemotingClient()
        after = await send_n(c, 4, "After")
        await lines.until(lambda: lines.acked() >= set(before + after), 120)
        # registered again under its group, though it sent no Settings since
        online = await c.call(R.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": GROUP})
        assert online.code == ResponseCode.SUCCESS, online.remark
        connections = fastjson.loads(bytes(online.body))
        assert connections["subscriptionTable"][TOPIC]["subString"] == "*"
        assert connections["consumeType"] == "CONSUME_ACTIVELY"
        last = await send_n(c, 1, "Last")  # the ninth: the client then ends
        await lines.until(lambda: lines.acked() >= set(before + after + last), 60)
        await asyncio.to_thread(proc.wait, 30)
        assert lines.items[-1] == {"done": True}, lines.items[-10:]
        failures = [x["failed"] for x in lines.items[mark:] if "failed" in x]
        # the restart window may cost transport errors, never a server error
        assert not [f for f in failures if "INTERNAL_SERVER_ERROR" in f["text"]
                    or f["type"] == "InternalErrorException"], failures
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
