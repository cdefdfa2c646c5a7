"""RemotingClient behaviour on real loopback sockets, under uvloop."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from rmq.common.codes import RequestCode
from rmq.remoting import RemotingClient, RemotingCommand, RemotingServer
from rmq.remoting.config import NettyClientConfig, NettyServerConfig
from rmq.remoting.exceptions import (
    RemotingConnectError,
    RemotingSendRequestError,
    RemotingTimeoutError,
)
from rmq.testing.procs import free_port
from rmq.testing.wait import wait_until

pytestmark = pytest.mark.timeout(30)


def run(coro, timeout: float = 20.0):
    return uvloop.run(asyncio.wait_for(coro, timeout))


class Named:
    """Answers with its own name so tests can tell servers apart."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.channels: list = []

    def process_request(self, channel, request):
        self.channels.append(channel)
        return RemotingCommand.create_response(0, self.name)


class Silent:
    def process_request(self, channel, request):
        return None


async def serve(name: str = "s", port: int = 0, proc=None) -> RemotingServer:
    server = RemotingServer(NettyServerConfig(listenPort=port, bindAddress="127.0.0.1"))
    server.register_default_processor(proc or Named(name))
    server.register_processor(1, Silent())
    await server.start()
    return server


def test_timeout_raises_and_cleans_the_response_table():
    async def body():
        server = await serve()
        client = RemotingClient(NettyClientConfig(clientCloseSocketIfTimeout=False))
        addr = f"127.0.0.1:{server.port}"
        loop = asyncio.get_running_loop()
        begin = loop.time()
        with pytest.raises(RemotingTimeoutError):
            await client.invoke(addr, RemotingCommand.create_request(1), 200)
        assert 0.15 < loop.time() - begin < 2
        assert client._responses == {}
        # the connection survives when clientCloseSocketIfTimeout is off
        assert (await client.invoke(addr, RemotingCommand.create_request(2))).remark == "s"
        await client.close()
        await server.stop()
    run(body())


def test_timeout_closes_the_socket_by_default_and_reconnects():
    async def body():
        server = await serve()
        client = RemotingClient()
        addr = f"127.0.0.1:{server.port}"
        with pytest.raises(RemotingTimeoutError):
            await client.invoke(addr, RemotingCommand.create_request(1), 100)
        await asyncio.sleep(0.05)
        assert len(server.channels) == 0
        assert (await client.invoke(addr, RemotingCommand.create_request(2))).remark == "s"
        await client.close()
        await server.stop()
    run(body())


def test_invoke_callback_success_and_timeout():
    async def body():
        server = await serve()
        client = RemotingClient()
        addr = f"127.0.0.1:{server.port}"
        results: list = []
        done = asyncio.Event()

        def cb(resp, exc):
            results.append((resp.remark if resp else None, type(exc).__name__ if exc else None))
            if len(results) == 3:
                done.set()

        client.invoke_callback(addr, RemotingCommand.create_request(2), 3000, cb)  # connects
        await wait_until(lambda: results, 5, 0.005, "the first answer")
        client.invoke_callback(addr, RemotingCommand.create_request(2), 3000, cb)  # connected
        client.invoke_callback(addr, RemotingCommand.create_request(1), 100, cb)
        await done.wait()
        assert sorted(results, key=str) == sorted(
            [("s", None), ("s", None), (None, "RemotingTimeoutError")], key=str)
        assert client._responses == {}
        await client.close()
        await server.stop()
    run(body())


def test_connect_error_and_reconnect_after_restart():
    async def body():
        port = free_port()
        client = RemotingClient(NettyClientConfig(connectTimeoutMillis=500))
        addr = f"127.0.0.1:{port}"
        with pytest.raises(RemotingConnectError):
            await client.invoke(addr, RemotingCommand.create_request(2))
        server = await serve("first", port)
        assert (await client.invoke(addr, RemotingCommand.create_request(2))).remark == "first"
        await server.stop()
        await asyncio.sleep(0.05)
        with pytest.raises((RemotingConnectError, RemotingSendRequestError)):
            await client.invoke(addr, RemotingCommand.create_request(2))
        server = await serve("second", port)
        assert (await client.invoke(addr, RemotingCommand.create_request(2))).remark == "second"
        await client.close()
        await server.stop()
    run(body())


def test_name_server_rotation_on_failure():
    async def body():
        dead = f"127.0.0.1:{free_port()}"
        a, b = await serve("a"), await serve("b")
        client = RemotingClient(NettyClientConfig(connectTimeoutMillis=500))
        client.update_namesrv_address_list([dead, f"127.0.0.1:{a.port}", f"127.0.0.1:{b.port}"])
        seen = {(await client.invoke(None, RemotingCommand.create_request(2))).remark
                for _ in range(5)}
        assert len(seen) == 1  # sticks to the chosen one while it is healthy
        first = seen.pop()
        await (a if first == "a" else b).stop()
        await asyncio.sleep(0.05)
        resp = await client.invoke(None, RemotingCommand.create_request(2))
        assert resp.remark == ("b" if first == "a" else "a")
        await client.close()
        await (b if first == "a" else a).stop()
    run(body())


def test_empty_name_server_list_is_a_connect_error():
    async def body():
        client = RemotingClient()
        with pytest.raises(RemotingConnectError):
            await client.invoke(None, RemotingCommand.create_request(2))
        await client.close()
    run(body())


class NotifyHandler:
    def __init__(self) -> None:
        self.got: list[RemotingCommand] = []
        self.oneway = asyncio.Event()

    def process_request(self, channel, request):
        self.got.append(request)
        if request.is_oneway():
            self.oneway.set()
            return None
        return RemotingCommand.create_response(0, "client says hi", {"clientID": "c1"})


def test_server_to_client_requests():
    async def body():
        named = Named("s")
        server = await serve(proc=named)
        client = RemotingClient()
        handler = NotifyHandler()
        client.register_processor(RequestCode.GET_CONSUMER_RUNNING_INFO, handler)
        client.register_processor(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, handler)
        await client.invoke(f"127.0.0.1:{server.port}", RemotingCommand.create_request(2))
        channel = named.channels[0]
        resp = await server.invoke(
            channel, RemotingCommand.create_request(RequestCode.GET_CONSUMER_RUNNING_INFO), 3000)
        assert resp.remark == "client says hi" and resp.ext_fields == {"clientID": "c1"}
        server.invoke_oneway(channel, RemotingCommand.create_request(
            RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "g"}))
        await asyncio.wait_for(handler.oneway.wait(), 5)
        assert handler.got[-1].ext_fields == {"consumerGroup": "g"}
        unknown = await server.invoke(channel, RemotingCommand.create_request(777), 3000)
        assert unknown.code == 3
        await client.close()
        await server.stop()
    run(body())


def test_oneway_from_client():
    async def body():
        named = Named("s")
        server = await serve(proc=named)
        client = RemotingClient()
        await client.invoke_oneway(f"127.0.0.1:{server.port}", RemotingCommand.create_request(5))
        for _ in range(100):
            if named.channels:
                break
            await asyncio.sleep(0.01)
        assert len(named.channels) == 1 and client._responses == {}
        await client.close()
        await server.stop()
    run(body())


def test_close_fails_pending_requests():
    async def body():
        server = await serve()
        client = RemotingClient()
        pending = asyncio.ensure_future(
            client.invoke(f"127.0.0.1:{server.port}", RemotingCommand.create_request(1), 10000))
        await wait_until(lambda: client._responses, 5, 0.005, "the request sent")
        await client.close()
        with pytest.raises(RemotingSendRequestError):
            await pending
        assert client._responses == {}
        await server.stop()
    run(body())


def test_many_timeouts_share_one_scan_that_stops_when_idle():
    async def body():
        from rmq.remoting.abstract import SCAN_INTERVAL
        server = await serve()
        client = RemotingClient(NettyClientConfig(clientCloseSocketIfTimeout=False))
        addr = f"127.0.0.1:{server.port}"
        await client.invoke(addr, RemotingCommand.create_request(2))
        loop = asyncio.get_running_loop()
        begin = loop.time()
        silent = [client.invoke(addr, RemotingCommand.create_request(1), 150) for _ in range(50)]
        answered = [client.invoke(addr, RemotingCommand.create_request(2), 3000)
                    for _ in range(50)]
        results = await asyncio.gather(*silent, *answered, return_exceptions=True)
        elapsed = loop.time() - begin
        assert all(isinstance(r, RemotingTimeoutError) for r in results[:50])
        assert all(r.remark == "s" for r in results[50:])
        assert 0.15 <= elapsed < 0.15 + SCAN_INTERVAL + 1.0
        assert client._responses == {}
        # nothing pending: no timer left ticking
        await wait_until(lambda: client._scan_handle is None, SCAN_INTERVAL * 3, 0.01)
        await client.close()
        await server.stop()
    run(body())


class Slow:
    """Answers after a delay, so a caller can give up first."""

    async def process_request(self, channel, request):
        await asyncio.sleep(0.3)
        return RemotingCommand.create_response(0, "late")


def test_answer_to_a_cancelled_request_is_dropped_quietly(caplog):
    """A caller cancelled mid-request (a client's timer at shutdown) expects no
    answer: its late answer is dropped at debug level; an answer nobody asked
    for is still a warning."""
    async def body():
        server = await serve(proc=Slow())
        client = RemotingClient()
        addr = f"127.0.0.1:{server.port}"
        task = asyncio.get_running_loop().create_task(
            client.invoke(addr, RemotingCommand.create_request(2), 3000))
        await wait_until(lambda: client._responses, 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert client._responses == {}
        with caplog.at_level("DEBUG", logger="rmq.remoting"):
            await asyncio.sleep(0.5)  # the late answer arrives
            stray = RemotingCommand.create_response(0, "stray")
            stray.opaque = 987654
            client._on_response(stray)
        warnings = [r for r in caplog.records if r.levelname == "WARNING"]
        debug = [r for r in caplog.records if "cancelled request" in r.getMessage()]
        assert len(debug) == 1 and "code 0" in debug[0].getMessage()
        assert len(warnings) == 1 and "unknown opaque 987654" in warnings[0].getMessage()
        await client.close()
        await server.stop()
    run(body())
