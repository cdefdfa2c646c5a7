"""The broker's renewal of auto-renew receipt handles (rmq.proxy.renew), seen
through raw gRPC calls: a message received with ``auto_renew`` stays
invisible past its invisible time while its client is there; once the client
sends NotifyClientTermination it comes back to another client of the group
after ``invisibleTimeMillisWhenClear``, with attempt 2, and is acked there;
without ``auto_renew`` the same invisible time passes and the message comes
back."""

from __future__ import annotations

import asyncio
import time
import uuid

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from rmq.proxy.v2 import definition_pb2 as pb
from rmq.proxy.v2 import service_pb2 as spb
from rmq.proxy.v2 import service_pb2_grpc as sgrpc
from rmq.testing.messaging import grpc_cluster

pytestmark = [pytest.mark.once, pytest.mark.timeout(120)]

TOPIC = "T5R"
EXPRESSION = pb.FilterExpression(type=pb.TAG, expression="*")


class Client:
    """One 5.x client of ``group``: its id and open Telemetry stream."""

    def __init__(self, stub: sgrpc.MessagingServiceStub, group: str, kind: int) -> None:
        self.stub = stub
        self.group = group
        self.kind = kind
        self.md = (("x-mq-client-id", f"renew-{uuid.uuid4().hex[:8]}@1"),)
        self.stream = None

    async def open(self) -> None:
        outgoing: asyncio.Queue = asyncio.Queue()
        await outgoing.put(spb.TelemetryCommand(settings=pb.Settings(
            client_type=self.kind, subscription=pb.Subscription(
                group=pb.Resource(name=self.group), subscriptions=[pb.SubscriptionEntry(
                    topic=pb.Resource(name=TOPIC), expression=EXPRESSION)]))))

        async def commands():
            while True:
                yield await outgoing.get()

        self.stream = self.stub.Telemetry(commands(), metadata=self.md)
        assert (await asyncio.wait_for(self.stream.read(), 10)).status.code == pb.OK

    async def receive(self, queue: pb.MessageQueue, auto_renew: bool, invisible_s: int,
                      poll_s: int = 5) -> list[pb.Message]:
        request = spb.ReceiveMessageRequest(
            group=pb.Resource(name=self.group), message_queue=queue,
            filter_expression=EXPRESSION, batch_size=4, auto_renew=auto_renew,
            invisible_duration=Duration(seconds=invisible_s),
            long_polling_timeout=Duration(seconds=poll_s))
        return [e.message async for e in self.stub.ReceiveMessage(
            request, metadata=self.md, timeout=poll_s + 10) if e.HasField("message")]

    async def ack(self, m: pb.Message) -> int:
        r = await self.stub.AckMessage(spb.AckMessageRequest(
            group=pb.Resource(name=self.group), topic=m.topic, entries=[spb.AckMessageEntry(
                message_id=m.system_properties.message_id,
                receipt_handle=m.system_properties.receipt_handle)]), metadata=self.md)
        return r.status.code


async def send(stub: sgrpc.MessagingServiceStub, body: bytes) -> None:
    md = (("x-mq-client-id", "renew-producer@1"),)
    msg = pb.Message(topic=pb.Resource(name=TOPIC), body=body, system_properties=
                     pb.SystemProperties(message_id=uuid.uuid4().hex.upper(), tag="T"))
    sent = await stub.SendMessage(spb.SendMessageRequest(messages=[msg]), metadata=md)
    assert sent.status.code == pb.OK, sent.status.message


@pytest.fixture
async def endpoint(tmp_path):
    async with grpc_cluster(tmp_path, "enableTopicMessageTypeCheck=false\n"
                            "defaultInvisibleTimeMills=4000\nrenewAheadTimeMillis=2500\n"
                            "renewSchedulePeriodMillis=500\ninvisibleTimeMillisWhenClear=1000\n",
                            topic=TOPIC, queues=1) as c:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{c.grpc_port}") as channel:
            stub = sgrpc.MessagingServiceStub(channel)
            route = await stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name=TOPIC)),
                                          metadata=(("x-mq-client-id", "renew-route@1"),))
            assert route.status.code == pb.OK
            yield stub, route.message_queues[0]


async def test_renewed_while_the_client_is_there_given_back_when_it_leaves(endpoint):
    stub, queue = endpoint
    group = "G5renewRaw"
    push, simple = Client(stub, group, pb.PUSH_CONSUMER), Client(stub, group, pb.SIMPLE_CONSUMER)
    await push.open()
    await simple.open()
    await send(stub, b"held")
    [m] = await push.receive(queue, auto_renew=True, invisible_s=0)
    assert m.body == b"held" and m.system_properties.delivery_attempt == 1
    # 4 s invisible, renewed from 1.5 s on: nothing for the other client for 7 s
    t0 = time.monotonic()
    assert await simple.receive(queue, auto_renew=False, invisible_s=10, poll_s=7) == []
    assert time.monotonic() - t0 >= 6.5

    gone = await stub.NotifyClientTermination(spb.NotifyClientTerminationRequest(
        group=pb.Resource(name=group)), metadata=push.md)
    assert gone.status.code == pb.OK
    t1 = time.monotonic()
    back = await simple.receive(queue, auto_renew=False, invisible_s=10, poll_s=10)
    assert [x.body for x in back] == [b"held"]
    assert back[0].system_properties.delivery_attempt == 2
    assert time.monotonic() - t1 < 6  # invisibleTimeMillisWhenClear, not the renewed minute
    assert await simple.ack(back[0]) == pb.OK


async def test_without_auto_renew_the_invisible_time_passes(endpoint):
    stub, queue = endpoint
    group = "G5noRenew"
    first, second = Client(stub, group, pb.SIMPLE_CONSUMER), Client(stub, group,
                                                                       pb.SIMPLE_CONSUMER)
    await first.open()
    await second.open()
    await send(stub, b"loose")
    [m] = await first.receive(queue, auto_renew=False, invisible_s=10)
    assert m.body == b"loose"
    back = await second.receive(queue, auto_renew=False, invisible_s=10, poll_s=20)
    assert [x.body for x in back] == [b"loose"]
    assert back[0].system_properties.delivery_attempt == 2
    assert await first.ack(m) == pb.INVALID_RECEIPT_HANDLE
