"""Connection limits and idle close on real broker and name-server processes.

``serverMaxConnections`` bounds the broker process (both of its ports
together), ``serverMaxConnectionsPerAddress`` one remote IP; refused
connections are closed unread with a log line while the admitted ones keep
being served.  ``serverChannelMaxIdleTimeSeconds`` closes silent
connections on both servers.  Loopback has the whole of 127.0.0.0/8, so a
test can be several remote addresses by binding its sockets to 127.0.0.x.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from rmq.common.codes import RequestCode
from rmq.remoting import RemotingCommand
from rmq.testing.cluster import Cluster, start_namesrv
from rmq.testing.procs import free_port

R = RequestCode
pytestmark = pytest.mark.timeout(90)


async def connect(port: int, source: str = "127.0.0.1"):
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))


async def ask(conn, code: int = R.GET_BROKER_RUNTIME_INFO) -> int:
    """One request on a raw connection; its response code."""
    reader, writer = conn
    writer.write(RemotingCommand.create_request(code).encode())
    size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), 10), "big")
    return RemotingCommand.decode(await reader.readexactly(size)).code


async def refused(conn) -> bool:
    """True when the server closed the connection without answering (an
    answer is read whole, so the connection can be used on)."""
    try:
        await ask(conn)
    except (ConnectionError, asyncio.IncompleteReadError):
        return True
    return False


def close(*conns) -> None:
    for _reader, writer in conns:
        writer.close()


@pytest.fixture
async def limited(tmp_path):
    c = Cluster(tmp_path, "serverMaxConnections=5\nserverMaxConnectionsPerAddress=2\n")
    c.start_broker()
    yield c
    await c.close()


async def test_per_address_and_total_limits(limited):
    c = limited
    # the broker's own registration with the name server is outbound: not counted
    a1, a2 = await connect(c.port), await connect(c.port - 2)  # both ports share the bound
    assert await ask(a1) == 0 and await ask(a2) == 0
    assert await refused(await connect(c.port))  # a third from 127.0.0.1
    b1, b2 = await connect(c.port, "127.0.0.2"), await connect(c.port, "127.0.0.2")
    d1 = await connect(c.port, "127.0.0.3")
    assert [await ask(x) for x in (b1, b2, d1)] == [0, 0, 0]
    assert await refused(await connect(c.port - 2, "127.0.0.4"))  # 5 open: the process is full
    assert [await ask(x) for x in (a1, a2, b1, b2, d1)] == [0] * 5  # the admitted are served

    close(a1)
    deadline = time.monotonic() + 10
    while True:  # the close reaches the broker asynchronously
        a3 = await connect(c.port)
        if not await refused(a3):
            break
        assert time.monotonic() < deadline, "a freed slot was never given back"
        await asyncio.sleep(0.1)
    assert await ask(a3) == 0
    close(a2, a3, b1, b2, d1)
    out = (c.tmp / "logs" / "rocketmqlogs" / "broker.log").read_text()
    # the first refusal is logged; those within the next second are counted into the next line
    assert "refused: 2 connections open from 127.0.0.1, serverMaxConnectionsPerAddress=2" in out


async def test_no_limit_by_default_and_idle_close(tmp_path):
    c = Cluster(tmp_path, "serverChannelMaxIdleTimeSeconds=2\n")
    c.start_broker()
    ns = None
    try:
        conns = [await connect(c.port) for _ in range(40)]
        assert [await ask(x) for x in conns] == [0] * 40
        begin = time.monotonic()
        silent = conns[0]
        assert await asyncio.wait_for(silent[0].read(1), 15) == b""  # closed by the broker
        assert 1.5 <= time.monotonic() - begin < 12
        busy = await connect(c.port)
        for _ in range(8):  # a connection in use is never idle
            assert await ask(busy) == 0
            await asyncio.sleep(0.5)
        close(busy, *conns)

        ns_port = free_port()
        ns = start_namesrv(tmp_path, ns_port, "serverChannelMaxIdleTimeSeconds=1\n")
        quiet = await connect(ns_port)
        assert await ask(quiet, R.GET_NAMESRV_CONFIG) == 0
        begin = time.monotonic()
        assert await asyncio.wait_for(quiet[0].read(1), 15) == b""
        assert 0.5 <= time.monotonic() - begin < 10
    finally:
        if ns is not None:
            ns.kill()
        await c.close()
