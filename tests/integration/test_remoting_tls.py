"""TLS in the three 4.9.8 server modes, with first-byte (0x16) detection."""

from __future__ import annotations

import asyncio
import shutil

import pytest
import uvloop

from rmq.remoting import RemotingClient, RemotingCommand, RemotingServer
from rmq.remoting.config import NettyClientConfig, NettyServerConfig
from rmq.remoting.exceptions import RemotingError
from rmq.remoting.tls import TlsConfig, TlsMode

pytestmark = pytest.mark.timeout(60)


def run(coro, timeout: float = 40.0):
    return uvloop.run(asyncio.wait_for(coro, timeout))


class Echo:
    def process_request(self, channel, request):
        return RemotingCommand.create_response(0, channel.attrs.setdefault("seen", "ok"))


async def serve(mode: TlsMode) -> RemotingServer:
    server = RemotingServer(NettyServerConfig(listenPort=0, bindAddress="127.0.0.1"),
                            tls=TlsConfig(serverMode=mode))
    server.register_default_processor(Echo())
    await server.start()
    return server


def client(tls: bool) -> RemotingClient:
    return RemotingClient(NettyClientConfig(useTLS=tls, connectTimeoutMillis=3000),
                          tls=TlsConfig(clientEnable=tls))


async def call(server: RemotingServer, use_tls: bool) -> str:
    c = client(use_tls)
    try:
        resp = await c.invoke(f"127.0.0.1:{server.port}", RemotingCommand.create_request(1), 3000)
        return resp.remark
    except RemotingError as e:
        return type(e).__name__
    finally:
        await c.close()


def test_openssl_is_available_for_test_mode_certificates():
    assert shutil.which("openssl"), "the openssl command makes the self-signed certificate"


def test_permissive_accepts_tls_and_plaintext():
    async def body():
        server = await serve(TlsMode.PERMISSIVE)
        assert await call(server, False) == "ok"
        assert await call(server, True) == "ok"
        c = client(True)
        await c.invoke(f"127.0.0.1:{server.port}", RemotingCommand.create_request(1))
        tls_channels = [ch for ch in server.channels
                        if ch._transport.get_extra_info("ssl_object") is not None]
        assert len(tls_channels) == 1
        await c.close()
        await server.stop()
    run(body())


def test_enforcing_refuses_plaintext():
    async def body():
        server = await serve(TlsMode.ENFORCING)
        assert await call(server, True) == "ok"
        assert await call(server, False) in ("RemotingSendRequestError", "RemotingTimeoutError")
        await server.stop()
    run(body())


def test_disabled_refuses_tls():
    async def body():
        server = await serve(TlsMode.DISABLED)
        assert await call(server, False) == "ok"
        assert await call(server, True) == "RemotingConnectError"
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"\x16\x03\x01\x02\x00" + bytes(100))  # a ClientHello record header
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
        await server.stop()
    run(body())


def test_mode_parsing_follows_java():
    assert TlsMode.parse("ENFORCING") is TlsMode.ENFORCING
    assert TlsMode.parse("nonsense") is TlsMode.PERMISSIVE
    assert TlsMode.parse(None) is TlsMode.PERMISSIVE
    cfg = TlsConfig.from_properties({"tls.server.mode": "enforcing"})
    assert cfg.serverMode is TlsMode.ENFORCING and cfg.clientEnable and cfg.testModeEnable
    cfg = TlsConfig.from_properties({"tls.enable": "true", "tls.test.mode.enable": "false"})
    assert cfg.serverMode is TlsMode.PERMISSIVE and cfg.clientEnable
    assert not cfg.testModeEnable
