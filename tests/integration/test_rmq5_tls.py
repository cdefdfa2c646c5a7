"""TLS on the gRPC port with the broker's certificates (``tls.server.certPath`` /
``keyPath``, the remoting TLS settings): grpcio secure channels that trust
that certificate are served; in the default ``tls.server.mode=permissive``
plaintext clients are served on the same port too (as 5.3.3's proxy does) and
the endpoint still sees each client's address; ``enforcing`` refuses
plaintext."""

from __future__ import annotations

import subprocess
from pathlib import Path

import grpc
import pytest

from rmq.common import fastjson
from rmq.common.codes import RequestCode as R
from rmq.common.codes import ResponseCode
from rmq.proxy.v2 import definition_pb2 as pb
from rmq.proxy.v2 import service_pb2 as spb
from rmq.proxy.v2 import service_pb2_grpc as sgrpc
from rmq.remoting import RemotingClient, RemotingCommand
from rmq.testing.cluster import broker_conf
from rmq.testing.procs import RmqProcess, free_port, wait_port

pytestmark = [pytest.mark.timeout(90)]


def certificate(tmp: Path) -> tuple[Path, Path]:
    cert, key = tmp / "server.pem", tmp / "server.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj", "/CN=rmq",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key),
                    "-out", str(cert)], check=True, capture_output=True, timeout=30)
    return cert, key


def start_broker(tmp: Path, mode: str) -> tuple[RmqProcess, int, int]:
    cert, key = certificate(tmp)
    grpc_port = free_port()
    port = free_port(span=4) + 2
    conf = broker_conf(tmp, port, f"grpcServerPort={grpc_port}\n")
    broker = RmqProcess("rmq.broker.startup", ["-c", conf], tmp / f"b-{mode}.out",
                        env={"ROCKETMQ_HOME": str(tmp), "tls.server.mode": mode,
                             "tls.test.mode.enable": "false",
                             "tls.server.certPath": str(cert), "tls.server.keyPath": str(key)})
    broker.start(wait_for_port=port)
    wait_port(grpc_port, timeout=20)
    return broker, grpc_port, port


def secure(tmp: Path, port: int) -> grpc.aio.Channel:
    roots = (tmp / "server.pem").read_bytes()
    return grpc.aio.secure_channel(f"127.0.0.1:{port}", grpc.ssl_channel_credentials(roots))


async def route(channel: grpc.aio.Channel, client_id: str) -> int:
    """The status of a QueryRoute (of a topic that does not exist: TOPIC_NOT_FOUND)."""
    r = await sgrpc.MessagingServiceStub(channel).QueryRoute(
        spb.QueryRouteRequest(topic=pb.Resource(name="NoSuchTopic")),
        metadata=(("x-mq-client-id", client_id),), timeout=10)
    return r.status.code


async def test_permissive_serves_tls_and_plaintext_on_one_port(tmp_path):
    broker, grpc_port, port = start_broker(tmp_path, "permissive")
    client = RemotingClient()
    try:
        async with secure(tmp_path, grpc_port) as channel:
            assert await route(channel, "tls-client") == pb.TOPIC_NOT_FOUND
            # a consumer registered over TLS shows with its own address
            stub = sgrpc.MessagingServiceStub(channel)
            settings = pb.Settings(client_type=pb.SIMPLE_CONSUMER, subscription=pb.Subscription(
                group=pb.Resource(name="GTls"), subscriptions=[pb.SubscriptionEntry(
                    topic=pb.Resource(name="TlsTopic"),
                    expression=pb.FilterExpression(type=pb.TAG, expression="*"))]))

            async def commands():
                yield spb.TelemetryCommand(settings=settings)

            stream = stub.Telemetry(commands(), metadata=(("x-mq-client-id", "tls-client"),))
            assert (await stream.read()).status.code == pb.OK
            r = await client.invoke(f"127.0.0.1:{port}", RemotingCommand.create_request(
                R.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "GTls"}), 5000)
            assert r.code == ResponseCode.SUCCESS, r.remark
            [conn] = fastjson.loads(bytes(r.body))["connectionSet"]
            assert conn["clientId"] == "tls-client"
            assert conn["clientAddr"].startswith("127.0.0.1:")
            stream.cancel()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            assert await route(channel, "plain-client") == pb.TOPIC_NOT_FOUND
    finally:
        await client.close()
        assert broker.stop() == 0


async def test_enforcing_refuses_plaintext(tmp_path):
    broker, grpc_port, _ = start_broker(tmp_path, "enforcing")
    try:
        async with secure(tmp_path, grpc_port) as channel:
            assert await route(channel, "tls-client") == pb.TOPIC_NOT_FOUND
        async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await route(channel, "plain-client")
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        assert broker.stop() == 0


async def test_permissive_without_a_certificate_serves_plaintext(tmp_path):
    grpc_port = free_port()
    port = free_port(span=4) + 2
    conf = broker_conf(tmp_path, port, f"grpcServerPort={grpc_port}\n")
    broker = RmqProcess("rmq.broker.startup", ["-c", conf], tmp_path / "b.out",
                        env={"ROCKETMQ_HOME": str(tmp_path), "tls.test.mode.enable": "false",
                             "tls.server.certPath": str(tmp_path / "missing.pem"),
                             "tls.server.keyPath": str(tmp_path / "missing.key")})
    broker.start(wait_for_port=port)
    try:
        wait_port(grpc_port, timeout=20)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            assert await route(channel, "plain-client") == pb.TOPIC_NOT_FOUND
        log = (tmp_path / "logs" / "rocketmqlogs" / "broker.log").read_text()
        assert "serves plaintext only, no TLS certificate" in log
    finally:
        assert broker.stop() == 0
