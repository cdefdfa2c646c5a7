"""Read naps in a real broker: a client with 4 sends in flight makes the
broker's loop nap after reads of more than one of them, and every send is
answered; requests one at a time never do; nor do brokers whose answers
wait for the flush, or on the default ``rmqReadNapMicros`` (0).  The naps are counted
in GET_BROKER_RUNTIME_INFO (``rmqReadNaps``)."""

from __future__ import annotations

import asyncio
import os

import orjson
import pytest

from rmq.client.headers import send_header_v2
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import RemotingClient
from rmq.remoting.command import RemotingCommand
from rmq.testing.cluster import broker_conf
from rmq.testing.procs import RmqProcess, free_port

R = RequestCode
TOPIC = "NapTopic"

pytestmark = pytest.mark.timeout(120)


def _send(opaque: int) -> RemotingCommand:
    ext = send_header_v2("pg", TOPIC, "TBW102", 4, opaque % 4, 0, 1_700_000_000_000 + opaque, 0,
                         f"UNIQ_KEY\x01NAP{opaque:010d}\x02WAIT\x01true", False, "broker-a")
    cmd = RemotingCommand.create_request(R.SEND_MESSAGE_V2, ext, os.urandom(1024))
    cmd.opaque = opaque
    return cmd


async def _naps(client: RemotingClient, addr: str) -> int:
    resp = await client.invoke(addr, RemotingCommand.create_request(R.GET_BROKER_RUNTIME_INFO),
                               5000)
    return int(orjson.loads(resp.body)["table"]["rmqReadNaps"])


class _InFlight(asyncio.Protocol):
    """A client keeping ``inflight`` sends in flight, each in its own write
    (the Java benchmark Producer's way): the next is written as an answer
    comes, until ``total`` were sent; the answers' codes by opaque."""

    def __init__(self, inflight: int, total: int) -> None:
        self.inflight, self.total = inflight, total
        self.sent = 0
        self.codes: dict[int, int] = {}
        self.buf = bytearray()
        self.done = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        for _ in range(self.inflight):
            self._next()

    def _next(self) -> None:
        if self.sent < self.total:
            self.sent += 1
            self.transport.write(_send(self.sent).encode())

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while len(self.buf) >= 4 and len(self.buf) >= 4 + int.from_bytes(self.buf[:4], "big"):
            n = 4 + int.from_bytes(self.buf[:4], "big")
            cmd = RemotingCommand.decode(bytes(self.buf[4:n]))
            del self.buf[:n]
            self.codes[cmd.opaque] = cmd.code
            self._next()
        if len(self.codes) == self.total and not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc) -> None:
        if not self.done.done():
            self.done.set_exception(ConnectionError(f"closed: {exc}"))


async def _streamed(port: int, inflight: int, total: int) -> dict[int, int]:
    """``total`` sends, ``inflight`` at a time; their answers' codes."""
    client = _InFlight(inflight, total)
    transport, _ = await asyncio.get_running_loop().create_connection(
        lambda: client, "127.0.0.1", port)
    try:
        await asyncio.wait_for(client.done, 60)
    finally:
        transport.close()
    return client.codes


# naps of 1 ms: a turn is long (no nap) only after 4 ms, which a slow
# machine's twin broker does not reach with 4 sends a read
@pytest.mark.parametrize("extra, naps", [
    ("", False),  # off by default
    ("rmqReadNapMicros=1000\n", True),
    ("rmqReadNapMicros=1000\nflushDiskType=SYNC_FLUSH\n", False),
])
async def test_streamed_reads_nap_lone_ones_never(tmp_path, extra, naps):
    port = free_port()
    conf = broker_conf(tmp_path, port, f"autoCreateTopicEnable=true\n{extra}")
    proc = RmqProcess("rmq.broker.startup", ["-c", conf], tmp_path / "broker.out",
                      env={"ROCKETMQ_HOME": str(tmp_path)})
    proc.start(wait_for_port=port)
    client = RemotingClient()
    addr = f"127.0.0.1:{port}"
    try:
        admin = RemotingCommand.create_request(R.UPDATE_AND_CREATE_TOPIC, {
            "topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": "4",
            "writeQueueNums": "4", "perm": "6", "topicFilterType": "SINGLE_TAG"})
        assert (await client.invoke(addr, admin, 5000)).code == ResponseCode.SUCCESS
        before = await _naps(client, addr)
        for op in range(50):  # one request in flight: a read of one frame each
            resp = await client.invoke(addr, _send(10_000 + op), 5000)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
        assert await _naps(client, addr) == before
        codes = await _streamed(port, 4, 1000)
        assert codes == {op: ResponseCode.SUCCESS for op in range(1, 1001)}
        assert (await _naps(client, addr) > before) is naps
    finally:
        await client.close()
        assert proc.stop() == 0, proc.output()
