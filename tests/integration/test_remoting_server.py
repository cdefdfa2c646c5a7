"""RemotingServer behaviour on real loopback sockets, under uvloop.

Raw sockets stand in for peers that split, coalesce, pipeline or corrupt
frames; RemotingClient is used where a well-behaved peer is enough.
"""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass

import pytest
import uvloop

from rmq.common.codes import ResponseCode
from rmq.common.protocol.header import CommandHeader, field_required
from rmq.remoting import RemotingClient, RemotingCommand, RemotingServer, SerializeType
from rmq.remoting.config import NettyServerConfig

pytestmark = pytest.mark.timeout(30)


def run(coro, timeout: float = 20.0):
    """Run one test body on a fresh uvloop loop, bounded in time."""
    return uvloop.run(asyncio.wait_for(coro, timeout))


def server_config(**kw) -> NettyServerConfig:
    return NettyServerConfig(listenPort=0, bindAddress="127.0.0.1", **kw)


class Echo:
    def __init__(self) -> None:
        self.calls = 0
        self.tasks: list = []

    def process_request(self, channel, request):
        self.calls += 1
        self.tasks.append(asyncio.current_task())
        return RemotingCommand.create_response(0, None, {"n": request.ext_fields["n"]}
                                               if request.ext_fields else None, request.body)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def on_channel_connect(self, addr, channel):
        self.events.append(("connect", addr))

    def on_channel_close(self, addr, channel):
        self.events.append(("close", addr))

    def on_channel_idle(self, addr, channel):
        self.events.append(("idle", addr))

    def on_channel_exception(self, addr, channel):
        self.events.append(("exception", addr))

    def kinds(self) -> list[str]:
        return [k for k, _ in self.events]


async def started(processors: dict | None = None, listener=None, default=None, **cfg):
    server = RemotingServer(server_config(**cfg), listener)
    for code, (proc, limit, pool) in (processors or {}).items():
        server.register_processor(code, proc, limit, pool)
    if default is not None:
        server.register_default_processor(default)
    await server.start()
    return server


async def read_frame(reader: asyncio.StreamReader) -> RemotingCommand:
    length = struct.unpack(">i", await reader.readexactly(4))[0]
    return RemotingCommand.decode(await reader.readexactly(length))


def request(code: int, n: int, stype: int = SerializeType.JSON, body: bytes | None = None,
            oneway: bool = False) -> RemotingCommand:
    cmd = RemotingCommand.create_request(code, {"n": str(n)}, body)
    cmd.serialize_type = stype
    if oneway:
        cmd.mark_oneway()
    return cmd


@pytest.mark.parametrize("stype", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_split_and_coalesced_frames(stype):
    async def body():
        server = await started({7: (Echo(), None, None)})
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        reqs = [request(7, i, stype, bytes([i % 256]) * (i * 37)) for i in range(60)]
        # the first ten one byte at a time, the rest coalesced into one write
        for cmd in reqs[:10]:
            for b in cmd.encode():
                writer.write(bytes([b]))
                await writer.drain()
        writer.write(b"".join(c.encode() for c in reqs[10:]))
        await writer.drain()
        for cmd in reqs:
            resp = await read_frame(reader)
            assert resp.opaque == cmd.opaque and resp.code == 0
            assert resp.serialize_type == stype and (resp.body or b"") == (cmd.body or b"")
        writer.close()
        await server.stop()
    run(body())


def test_large_frame_grows_the_buffer():
    async def body():
        server = await started({7: (Echo(), None, None)})
        client = RemotingClient()
        payload = bytes(range(256)) * (3 * 4096)  # 3 MiB
        resp = await client.invoke(f"127.0.0.1:{server.port}", request(7, 1, body=payload))
        assert resp.body == payload
        await client.close()
        await server.stop()
    run(body())


def test_sync_processor_runs_without_a_task_and_pipelines():
    async def body():
        echo = Echo()
        server = await started({7: (echo, None, None)})
        client = RemotingClient()
        addr = f"127.0.0.1:{server.port}"
        reqs = [request(7, i) for i in range(300)]
        resps = await asyncio.gather(*(client.invoke(addr, r) for r in reqs))
        assert [r.ext_fields["n"] for r in resps] == [str(i) for i in range(300)]
        assert echo.calls == 300 and set(echo.tasks) == {None}
        assert not server._tasks
        await client.close()
        await server.stop()
    run(body())


def test_many_concurrent_clients():
    async def body():
        server = await started({7: (Echo(), None, None)})
        addr = f"127.0.0.1:{server.port}"
        clients = [RemotingClient() for _ in range(40)]

        async def work(c: RemotingClient, k: int) -> None:
            for i in range(15):
                r = await c.invoke(addr, request(7, k * 100 + i, k % 2))
                assert r.ext_fields == {"n": str(k * 100 + i)} and r.serialize_type == k % 2

        await asyncio.gather(*(work(c, k) for k, c in enumerate(clients)))
        assert len(server.channels) == 40
        for c in clients:
            await c.close()
        await server.stop()
    run(body())


def test_default_processor_takes_unregistered_codes():
    async def body():
        echo = Echo()
        server = await started(default=echo)
        client = RemotingClient()
        resp = await client.invoke(f"127.0.0.1:{server.port}", request(12345, 1))
        assert resp.code == 0 and echo.calls == 1
        await client.close()
        await server.stop()
    run(body())


def test_oneway_is_processed_but_never_answered():
    async def body():
        echo = Echo()
        server = await started({7: (echo, None, None)})
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        first = request(7, 1, oneway=True)
        second = request(7, 2)
        writer.write(first.encode() + second.encode())
        resp = await read_frame(reader)
        assert resp.opaque == second.opaque and echo.calls == 2
        writer.close()
        await server.stop()
    run(body())


class Gate:
    """Async processor that holds every request until released."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.entered = 0

    async def process_request(self, channel, request):
        self.entered += 1
        await self.event.wait()
        return RemotingCommand.create_response(0, "released")


def test_admission_limit_answers_overload_and_pools_are_shared():
    async def body():
        gate = Gate()
        server = await started({7: (gate, 2, "send"), 8: (gate, None, "send")})
        client = RemotingClient()
        addr = f"127.0.0.1:{server.port}"
        held = [asyncio.ensure_future(client.invoke(addr, request(c, 0))) for c in (7, 8)]
        while gate.entered < 2:
            await asyncio.sleep(0.01)
        for code in (7, 8):
            busy = await client.invoke(addr, request(code, 1))
            assert busy.code == ResponseCode.SYSTEM_BUSY
            assert busy.remark == "[OVERLOAD]system busy, start flow control for a while"
        gate.event.set()
        assert [r.remark for r in await asyncio.gather(*held)] == ["released"] * 2
        ok = await client.invoke(addr, request(7, 2))
        assert ok.code == 0
        await client.close()
        await server.stop()
    run(body())


class Refuser(Echo):
    def reject_request(self) -> bool:
        return True


def test_reject_request_answers_rejectrequest_even_for_oneway():
    async def body():
        server = await started({7: (Refuser(), None, None)})
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        oneway = request(7, 1, oneway=True)
        writer.write(oneway.encode())
        resp = await read_frame(reader)
        assert resp.opaque == oneway.opaque and resp.code == ResponseCode.SYSTEM_BUSY
        assert resp.remark == "[REJECTREQUEST]system busy, start flow control for a while"
        writer.close()
        await server.stop()
    run(body())


@dataclass(slots=True)
class NeedsQueue(CommandHeader):
    topic: str = field_required()
    queueId: int = field_required()


class Failing:
    def __init__(self) -> None:
        self.calls = 0

    def process_request(self, channel, request):
        self.calls += 1
        if request.code == 9:
            request.decode_header(NeedsQueue)
        raise RuntimeError("boom in processor")


class AsyncFailing:
    async def process_request(self, channel, request):
        await asyncio.sleep(0)
        raise ValueError("async boom")


def test_processor_errors_become_system_error_and_oneway_stays_silent():
    async def body():
        failing = Failing()
        server = await started({7: (failing, None, None), 9: (failing, None, None),
                                10: (AsyncFailing(), None, None), 11: (Echo(), None, None)})
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        quiet = request(7, 0, oneway=True)
        loud = request(7, 1)
        header = RemotingCommand.create_request(9, {"topic": "T"})
        header.serialize_type = SerializeType.ROCKETMQ
        late = request(10, 2)
        ok = request(11, 3)
        writer.write(b"".join(c.encode() for c in (quiet, loud, header, late, ok)))
        got = {}
        for _ in range(4):
            r = await read_frame(reader)
            got[r.opaque] = r
        assert quiet.opaque not in got and failing.calls == 3
        assert got[loud.opaque].code == ResponseCode.SYSTEM_ERROR
        assert "RuntimeError: boom in processor" in got[loud.opaque].remark
        assert got[header.opaque].code == ResponseCode.SYSTEM_ERROR
        assert "the custom field queueId is null" in got[header.opaque].remark
        assert got[header.opaque].serialize_type == SerializeType.ROCKETMQ
        assert "ValueError: async boom" in got[late.opaque].remark
        assert got[ok.opaque].code == 0
        writer.close()
        await server.stop()
    run(body())


async def assert_closed(reader: asyncio.StreamReader) -> None:
    assert await asyncio.wait_for(reader.read(), 5) == b""


@pytest.mark.parametrize("garbage", [
    struct.pack(">i", 2048) + bytes(2048),               # over the 1 KiB maximum
    struct.pack(">i", -5),                                # negative length
    struct.pack(">i", 2) + b"ab",                         # shorter than the header word
    struct.pack(">ii", 12, 100) + bytes(8),               # header longer than frame
    struct.pack(">ii", 9, 5) + b"{oops",                  # bad JSON
    struct.pack(">ii", 9, (7 << 24) | 5) + b"{}   ",      # unknown serialize type
    struct.pack(">ii", 25, (1 << 24) | 21) + bytes(13) + b"\x00\x00\x10\x00" + bytes(4),
])
def test_bad_frames_close_only_that_connection(garbage):
    async def body():
        rec = Recorder()
        server = await started({7: (Echo(), None, None)}, rec, frameMaxLength=1024)
        good_reader, good_writer = await asyncio.open_connection("127.0.0.1", server.port)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(garbage)
        await assert_closed(reader)
        cmd = request(7, 5)
        good_writer.write(cmd.encode())
        assert (await read_frame(good_reader)).opaque == cmd.opaque
        for _ in range(100):
            if rec.kinds().count("close") == 1:
                break
            await asyncio.sleep(0.01)
        bad = [k for k, a in rec.events if a == rec.events[rec.kinds().index("close")][1]]
        # a connection is announced once its first byte arrives (TLS sniffing)
        assert bad in (["connect", "exception", "close"], ["exception", "close"])
        assert rec.kinds().count("connect") == 1 + (bad[0] == "connect")
        good_writer.close()
        await server.stop()
    run(body())


def test_idle_connections_are_closed_with_events():
    async def body():
        rec = Recorder()
        server = await started({7: (Echo(), None, None)}, rec,
                               serverChannelMaxIdleTimeSeconds=1)
        silent_reader, silent_writer = await asyncio.open_connection("127.0.0.1", server.port)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        cmd = request(7, 1)
        writer.write(cmd.encode())
        assert (await read_frame(reader)).opaque == cmd.opaque
        loop = asyncio.get_running_loop()
        begin = loop.time()
        await assert_closed(reader)
        waited = loop.time() - begin
        assert 0.9 <= waited < 4.0
        await asyncio.sleep(0.05)
        assert rec.kinds() == ["connect", "idle", "close"]
        await assert_closed(silent_reader)  # never sent a byte: closed, no events
        assert rec.kinds() == ["connect", "idle", "close"]
        writer.close()
        silent_writer.close()
        await server.stop()
    run(body())


class Slow:
    async def process_request(self, channel, request):
        await asyncio.sleep(0.3)
        return RemotingCommand.create_response(0, "slow done")


def test_graceful_stop_answers_in_flight_requests():
    async def body():
        server = await started({7: (Slow(), None, None)})
        port = server.port
        client = RemotingClient()
        pending = asyncio.ensure_future(client.invoke(f"127.0.0.1:{port}", request(7, 1)))
        await asyncio.sleep(0.1)
        await server.stop(grace_seconds=5)
        resp = await pending
        assert resp.remark == "slow done"
        with pytest.raises(OSError):
            await asyncio.open_connection("127.0.0.1", port)
        await client.close()
    run(body())


def test_stop_under_load_fails_callers_cleanly():
    async def body():
        server = await started({7: (Echo(), None, None), 8: (Gate(), None, None)})
        client = RemotingClient()
        addr = f"127.0.0.1:{server.port}"
        stuck = asyncio.ensure_future(client.invoke(addr, request(8, 0), 10000))

        async def hammer() -> int:
            done = 0
            for i in range(10000):
                try:
                    await client.invoke(addr, request(7, i), 2000)
                except Exception:
                    return done
                done += 1
            return done

        workers = [asyncio.ensure_future(hammer()) for _ in range(8)]
        await asyncio.sleep(0.2)
        await server.stop(grace_seconds=0.2)
        assert all(n > 0 for n in await asyncio.gather(*workers))
        with pytest.raises(Exception, match="connection closed|failed"):
            await stuck
        assert client._responses == {}
        await client.close()
    run(body())


def test_stop_does_not_wait_for_silent_connections():
    async def body():
        server = await started({7: (Echo(), None, None)})
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        loop = asyncio.get_running_loop()
        begin = loop.time()
        await server.stop(grace_seconds=5)
        assert loop.time() - begin < 2
        await assert_closed(reader)
        writer.close()
    run(body())
