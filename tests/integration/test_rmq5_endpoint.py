"""The gRPC endpoint's life with the broker process: it stops with the broker
even while a client holds a Telemetry stream open; a port already taken
leaves the broker serving 4.x clients with one clear line; enableProxy=false
opens no port; the Settings handshake answers a producer with the merged
settings (max body size, message type check, backoff)."""

from __future__ import annotations

import asyncio
import socket
import time

import grpc
import pytest

from rmq.common.codes import RequestCode as R
from rmq.common.codes import ResponseCode
from rmq.proxy.v2 import definition_pb2 as pb
from rmq.proxy.v2 import service_pb2 as spb
from rmq.proxy.v2 import service_pb2_grpc as sgrpc
from rmq.testing.cluster import Cluster, broker_conf
from rmq.testing.procs import RmqProcess, free_port, wait_port
from rmq.testing.wait import wait_until

pytestmark = [pytest.mark.timeout(90)]
MD = (("x-mq-client-id", "endpoint-test"),)


def producer_settings(topic: str) -> pb.Settings:
    return pb.Settings(client_type=pb.PRODUCER,
                       publishing=pb.Publishing(topics=[pb.Resource(name=topic)],
                                                max_body_size=128 * 1024 * 1024,
                                                validate_message_type=True))


async def test_settings_echo_and_clean_stop_with_an_open_stream(tmp_path):
    port = free_port()
    c = Cluster(tmp_path, f"grpcServerPort={port}\nmaxMessageSize=65536\n")
    c.start_broker()
    try:
        wait_port(port, timeout=20)
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = sgrpc.MessagingServiceStub(channel)
            outgoing: asyncio.Queue = asyncio.Queue()
            await outgoing.put(spb.TelemetryCommand(settings=producer_settings("TBW102")))

            async def commands():
                while True:
                    yield await outgoing.get()

            stream = stub.Telemetry(commands(), metadata=MD)
            answer = await asyncio.wait_for(stream.read(), 10)
            assert answer.status.code == pb.OK
            assert answer.settings.publishing.max_body_size == 65536
            assert answer.settings.publishing.validate_message_type
            assert answer.settings.backoff_policy.max_attempts == 3
            hb = await stub.Heartbeat(spb.HeartbeatRequest(client_type=pb.PRODUCER), metadata=MD)
            assert hb.status.code == pb.OK
            # settings with neither publishing nor subscription
            await outgoing.put(spb.TelemetryCommand(settings=pb.Settings(client_type=pb.PRODUCER)))
            answer = await asyncio.wait_for(stream.read(), 10)
            assert answer.status.code == pb.UNRECOGNIZED_CLIENT_TYPE
            began = time.monotonic()
            assert c.broker.stop() == 0
            assert time.monotonic() - began < 10
            ended = await asyncio.wait_for(stream.read(), 10)
            assert ended is grpc.aio.EOF
    finally:
        c.broker.stop()
        await c.client.close()
        c.namesrv.kill()


async def test_port_in_use_leaves_remoting_serving(tmp_path):
    port = free_port()
    taken = socket.socket()
    taken.bind(("0.0.0.0", port))
    taken.listen()
    c = Cluster(tmp_path, f"grpcServerPort={port}\n")
    try:
        c.start_broker()
        r = await c.call(R.GET_BROKER_RUNTIME_INFO)
        assert r.code == ResponseCode.SUCCESS
        await wait_until(lambda: "gRPC endpoint not started" in c.broker.output(), 10, 0.1,
                         "the broker's line about the taken port")
    finally:
        taken.close()
        assert c.broker.stop() == 0
        await c.client.close()
        c.namesrv.kill()


async def test_enable_proxy_false_opens_no_port(tmp_path):
    grpc_port = free_port()
    port = free_port(span=4) + 2
    conf = broker_conf(tmp_path, port, f"grpcServerPort={grpc_port}\nenableProxy=false\n")
    broker = RmqProcess("rmq.broker.startup", ["-c", conf], tmp_path / "b.out",
                        env={"ROCKETMQ_HOME": str(tmp_path)}).start(wait_for_port=port)
    try:
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", grpc_port), timeout=1).close()
    finally:
        assert broker.stop() == 0
