"""A 5.x gRPC consumer group as the operators' tools see it: ``rmq-admin
consumerConnection`` and the web console's group pages list the client (its
id, address, language, CONSUME_ACTIVELY, its subscription), and
``rocketmq_rpc_latency`` carries a row per gRPC method (protocol_type "grpc",
the 5.x status as response code, receives as long polling; the Telemetry
stream one per command the client writes on it) beside the remoting requests
the calls turned into."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
import uuid

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from rmq.proxy.v2 import definition_pb2 as pb
from rmq.proxy.v2 import service_pb2 as spb
from rmq.proxy.v2 import service_pb2_grpc as sgrpc
from rmq.testing.messaging import grpc_cluster
from rmq.testing.procs import free_port, run_cli
from tests.integration.test_dashboard import start_dashboard

pytestmark = [pytest.mark.once, pytest.mark.timeout(120)]

TOPIC, GROUP, CLIENT_ID = "T5O", "G5obs", "obs-client@1"
MD = (("x-mq-client-id", CLIENT_ID), ("x-mq-language", "PYTHON"))


def settings() -> pb.Settings:
    return pb.Settings(client_type=pb.SIMPLE_CONSUMER, subscription=pb.Subscription(
        group=pb.Resource(name=GROUP), subscriptions=[pb.SubscriptionEntry(
            topic=pb.Resource(name=TOPIC),
            expression=pb.FilterExpression(type=pb.TAG, expression="TagA||TagB"))]))


def get_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


async def test_grpc_group_in_admin_console_and_metrics(tmp_path):
    prom_port = free_port()
    async with grpc_cluster(tmp_path, f"metricsExporterType=PROM\nmetricsPromExporterHost=127.0.0.1\n"
                            f"metricsPromExporterPort={prom_port}\n"
                            "enableTopicMessageTypeCheck=false\n", topic=TOPIC, queues=2) as c:
        dashboard = None
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{c.grpc_port}") as channel:
                stub = sgrpc.MessagingServiceStub(channel)
                outgoing: asyncio.Queue = asyncio.Queue()
                await outgoing.put(spb.TelemetryCommand(settings=settings()))

                async def commands():
                    while True:
                        yield await outgoing.get()

                stream = stub.Telemetry(commands(), metadata=MD)
                assert (await asyncio.wait_for(stream.read(), 10)).status.code == pb.OK
                route = await stub.QueryRoute(spb.QueryRouteRequest(
                    topic=pb.Resource(name=TOPIC)), metadata=MD)
                assert route.status.code == pb.OK
                msg = pb.Message(topic=pb.Resource(name=TOPIC), body=b"hello", system_properties=
                                 pb.SystemProperties(message_id=uuid.uuid4().hex.upper(), tag="TagA"))
                sent = await stub.SendMessage(spb.SendMessageRequest(messages=[msg]), metadata=MD)
                assert sent.status.code == pb.OK
                got = [e async for e in stub.ReceiveMessage(spb.ReceiveMessageRequest(
                    group=pb.Resource(name=GROUP), message_queue=route.message_queues[0],
                    filter_expression=pb.FilterExpression(type=pb.TAG, expression="TagA||TagB"),
                    batch_size=4, invisible_duration=Duration(seconds=15),
                    long_polling_timeout=Duration(seconds=5)), metadata=MD, timeout=20)]
                assert got[0].status.code == pb.OK and got[1].message.body == b"hello"

                # rmq-admin consumerConnection
                ns = f"127.0.0.1:{c.ns_port}"
                done = await asyncio.to_thread(run_cli, "rmq.tools.admin", [
                    "consumerConnection", "-n", ns, "-g", GROUP, "--json"])
                assert done.returncode == 0, done.stderr
                conn = json.loads(done.stdout)
                [client] = conn["connectionSet"]
                assert client["clientId"] == CLIENT_ID and client["language"] == "PYTHON"
                assert client["clientAddr"].startswith("127.0.0.1:")
                assert conn["consumeType"] == "CONSUME_ACTIVELY"
                assert conn["subscriptionTable"][TOPIC]["subString"] == "TagA||TagB"

                # the web console's group list and group page
                dashboard, url = start_dashboard(tmp_path, ns)
                deadline = time.monotonic() + 20
                while True:
                    rows = {g["group"]: g for g in json.loads(get_text(f"{url}/api/groups"))}
                    if GROUP in rows and rows[GROUP]["connections"] == 1:
                        break
                    assert time.monotonic() < deadline, rows
                    await asyncio.sleep(0.5)
                assert rows[GROUP]["consumeType"] == "CONSUME_ACTIVELY"
                detail = json.loads(get_text(f"{url}/api/groups/{GROUP}"))
                assert detail["online"] and detail["connections"][0]["clientId"] == CLIENT_ID

                # rocketmq_rpc_latency: the gRPC methods and the remoting requests beneath
                text = get_text(f"http://127.0.0.1:{prom_port}/metrics")
                rows = [line for line in text.splitlines()
                        if line.startswith("rocketmq_rpc_latency_count")]
                grpc_rows = [line for line in rows if 'protocol_type="grpc"' in line]
                for method in ("query_route", "send_message", "receive_message", "telemetry"):
                    assert any(f'request_code="{method}"' in line and 'response_code="ok"' in line
                               for line in grpc_rows), (method, grpc_rows)
                [receive] = [line for line in grpc_rows if 'request_code="receive_message"' in line]
                assert 'is_long_polling="true"' in receive and receive.endswith(" 1.0")
                assert any('protocol_type="remoting"' in line and 'request_code="pop_message"' in line
                           for line in rows), rows
                stream.cancel()
        finally:
            if dashboard is not None:
                dashboard.stop()


