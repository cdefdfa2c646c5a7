"""TLS certificates rotated under load (4.9.8's FileWatchService on
tls.server.certPath/keyPath/trustCertPath): no request fails, new
connections get the new certificate, open ones keep working; half a rotation
and a pair that does not match are not loaded.  One in-process server under
load, and one real rmq-broker process."""

from __future__ import annotations

import asyncio
import os
import shutil
import ssl
import subprocess
from pathlib import Path

import pytest
import uvloop

from rmq.common.codes import RequestCode
from rmq.remoting import RemotingClient, RemotingCommand, RemotingServer
from rmq.remoting.config import NettyClientConfig, NettyServerConfig
from rmq.remoting.tls import TlsConfig, TlsMode
from rmq.testing.cluster import broker_conf, start_namesrv
from rmq.testing.procs import RmqProcess, free_port
from rmq.testing.wait import wait_until

pytestmark = pytest.mark.timeout(90)


def make_pair(directory: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate (CN=name) and its key, made with openssl."""
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run([shutil.which("openssl"), "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj", f"/CN={name}",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True,
                   timeout=30)
    return cert, key


def der(cert: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(cert.read_text())


def install(src: Path, dst: Path) -> None:
    """Replace ``dst`` with ``src`` as a deployment tool does (write beside, rename)."""
    tmp = dst.with_suffix(".new")
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst)


class Echo:
    def process_request(self, channel, request):
        return RemotingCommand.create_response(0, "ok")


def tls_client() -> RemotingClient:
    return RemotingClient(NettyClientConfig(useTLS=True, connectTimeoutMillis=3000),
                          tls=TlsConfig(clientEnable=True))


async def served_cert(addr: str, code: int = 1) -> bytes:
    """The certificate a fresh TLS connection is given (after one request on it)."""
    client = tls_client()
    try:
        r = await client.invoke(addr, RemotingCommand.create_request(code), 3000)
        assert r.code == 0, r.remark
        return client._table[addr]._transport.get_extra_info("ssl_object").getpeercert(True)
    finally:
        await client.close()


def test_rotation_under_load_fails_no_request(tmp_path):
    first, second, third = (make_pair(tmp_path, n) for n in ("first", "second", "third"))
    cert, key = tmp_path / "server.crt", tmp_path / "server.key"
    install(first[0], cert)
    install(first[1], key)

    async def body():
        server = RemotingServer(
            NettyServerConfig(listenPort=0, bindAddress="127.0.0.1"),
            tls=TlsConfig(serverMode=TlsMode.PERMISSIVE, testModeEnable=False,
                          serverCertPath=str(cert), serverKeyPath=str(key)))
        server.register_default_processor(Echo())
        await server.start()
        addr = f"127.0.0.1:{server.port}"
        stop = asyncio.Event()
        done: list[int] = []
        failures: list[str] = []

        async def reconnecting() -> None:  # a new connection every few requests
            while not stop.is_set() and len(done) < 200_000:
                client = tls_client()
                try:
                    for _ in range(5):
                        r = await client.invoke(addr, RemotingCommand.create_request(1), 5000)
                        (done if r.code == 0 else failures).append(r.code)
                except Exception as e:  # noqa: BLE001 - every failure counts
                    failures.append(repr(e))
                finally:
                    await client.close()

        kept = tls_client()  # one connection open across the rotation

        async def steady() -> None:
            while not stop.is_set() and len(done) < 200_000:
                try:
                    r = await kept.invoke(addr, RemotingCommand.create_request(1), 5000)
                    (done if r.code == 0 else failures).append(r.code)
                except Exception as e:  # noqa: BLE001
                    failures.append(repr(e))

        try:
            assert await served_cert(addr) == der(first[0])
            load = [asyncio.create_task(reconnecting()) for _ in range(3)]
            load.append(asyncio.create_task(steady()))
            await asyncio.sleep(0.5)
            before = len(done)
            install(second[0], cert)
            await asyncio.sleep(0.7)  # a poll sees the certificate alone: no reload yet
            assert await served_cert(addr) == der(first[0])
            install(second[1], key)
            await wait_until(lambda: _is(served_cert(addr), der(second[0])))
            await asyncio.sleep(0.5)
            stop.set()
            await asyncio.gather(*load)
            assert failures == []
            assert len(done) - before > 100, len(done)
            kept_cert = kept._table[addr]._transport.get_extra_info("ssl_object").getpeercert(True)
            assert kept_cert == der(first[0])  # the open connection kept its session

            # a pair that does not match: logged, the second certificate stays
            install(third[0], cert)
            install(first[1], key)
            await asyncio.sleep(1.5)
            assert await served_cert(addr) == der(second[0])
            install(third[1], key)
            await wait_until(lambda: _is(served_cert(addr), der(third[0])))
        finally:
            stop.set()
            await kept.close()
            await server.stop()

    uvloop.run(asyncio.wait_for(body(), 70))


async def _is(awaitable, expected) -> bool:
    return await awaitable == expected


def test_broker_process_serves_a_rotated_certificate(tmp_path):
    first, second = make_pair(tmp_path, "first"), make_pair(tmp_path, "second")
    cert, key = tmp_path / "broker.crt", tmp_path / "broker.key"
    install(first[0], cert)
    install(first[1], key)
    ns_port = free_port()
    namesrv = start_namesrv(tmp_path, ns_port)
    port = free_port(span=4) + 2
    broker = RmqProcess(
        "rmq.broker.startup", ["-c", broker_conf(tmp_path, port), "-n", f"127.0.0.1:{ns_port}"],
        tmp_path / "broker.out",
        env={"ROCKETMQ_HOME": str(tmp_path), "tls.server.mode": "permissive",
             "tls.test.mode.enable": "false", "tls.server.certPath": str(cert),
             "tls.server.keyPath": str(key)})
    try:
        broker.start(wait_for_port=(port, port - 2))

        async def body():
            for p in (port, port - 2):
                assert await served_cert(f"127.0.0.1:{p}", RequestCode.GET_BROKER_RUNTIME_INFO) \
                    == der(first[0])
            install(second[0], cert)
            install(second[1], key)
            for p in (port, port - 2):  # both ports reload
                await wait_until(lambda p=p: _is(served_cert(f"127.0.0.1:{p}",
                                                        RequestCode.GET_BROKER_RUNTIME_INFO),
                                            der(second[0])))

        uvloop.run(asyncio.wait_for(body(), 60))
    finally:
        broker.kill()
        namesrv.kill()
