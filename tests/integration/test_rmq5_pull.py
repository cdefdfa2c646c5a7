"""The pull-consumer RPCs (PullMessage, UpdateOffset, GetOffset, QueryOffset)
and RecallMessage of the gRPC endpoint, driven through grpcio stubs of
``rmq.proxy.v2`` against a real rmq-broker (the official Python client 5.1.2
calls none of the pull RPCs)."""

from __future__ import annotations

import asyncio
import base64
import time
import uuid

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from rmq.client.codec import decode_messages
from rmq.client.headers import pull_header, send_header_v2
from rmq.common.codes import RequestCode as R
from rmq.common.codes import ResponseCode
from rmq.proxy.v2 import definition_pb2 as pb
from rmq.proxy.v2 import service_pb2 as spb
from rmq.proxy.v2 import service_pb2_grpc as sgrpc
from rmq.testing.messaging import grpc_cluster
from rmq.testing.wait import wait_until
from tests.integration.test_messaging_raw import props

pytestmark = [pytest.mark.timeout(120)]

TOPIC = "T5P"
GROUP = "GP"
MD = (("x-mq-client-id", "pull-test"),)


@pytest.fixture
async def cluster(tmp_path):
    async with grpc_cluster(tmp_path, "recallMessageEnable=true\nenableTopicMessageTypeCheck=false\n",
                            topic=TOPIC) as c:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{c.grpc_port}") as channel:
            c.stub = sgrpc.MessagingServiceStub(channel)
            yield c


def queue(qid: int = 0) -> pb.MessageQueue:
    return pb.MessageQueue(topic=pb.Resource(name=TOPIC), id=qid,
                           broker=pb.Broker(name="broker-a"))


async def send(c, tag: str, body: str, qid: int = 0) -> None:
    ext = send_header_v2("pg", TOPIC, "TBW102", 4, qid, 0, int(time.time() * 1000), 0,
                         props(TAGS=tag, WAIT="true"), False, "broker-a")
    r = await c.call(R.SEND_MESSAGE_V2, ext, body.encode())
    assert r.code == ResponseCode.SUCCESS, r.remark


async def pull(c, offset: int, tags: str = "*", qid: int = 0, poll_s: int = 5,
               timeout: float = 15) -> tuple[pb.Status, list[pb.Message], int | None]:
    request = spb.PullMessageRequest(
        group=pb.Resource(name=GROUP), message_queue=queue(qid), offset=offset, batch_size=32,
        filter_expression=pb.FilterExpression(type=pb.TAG, expression=tags),
        long_polling_timeout=Duration(seconds=poll_s))
    st, msgs, nxt = None, [], None
    async for element in c.stub.PullMessage(request, metadata=MD, timeout=timeout):
        kind = element.WhichOneof("content")
        if kind == "status":
            st = element.status
        elif kind == "message":
            msgs.append(element.message)
        else:
            nxt = element.next_offset
    return st, msgs, nxt


async def test_pull_and_offsets(cluster):
    c = cluster
    for i in range(5):
        await send(c, "TagA" if i % 2 == 0 else "TagB", f"m{i}")
    q = c.stub.QueryOffset
    r = await q(spb.QueryOffsetRequest(message_queue=queue(), query_offset_policy=pb.BEGINNING),
                metadata=MD)
    assert (r.status.code, r.offset) == (pb.OK, 0)
    r = await q(spb.QueryOffsetRequest(message_queue=queue(), query_offset_policy=pb.END),
                metadata=MD)
    assert (r.status.code, r.offset) == (pb.OK, 5)
    r = await q(spb.QueryOffsetRequest(message_queue=queue(), query_offset_policy=pb.TIMESTAMP,
                                       timestamp=Timestamp(seconds=int(time.time()) - 3600)),
                metadata=MD)
    assert (r.status.code, r.offset) == (pb.OK, 0)
    r = await q(spb.QueryOffsetRequest(message_queue=queue(), query_offset_policy=pb.TIMESTAMP),
                metadata=MD)
    assert r.status.code == pb.BAD_REQUEST

    st, msgs, nxt = await pull(c, 0)
    assert st.code == pb.OK and nxt == 5
    assert [m.body for m in msgs] == [b"m0", b"m1", b"m2", b"m3", b"m4"]
    assert [m.system_properties.queue_offset for m in msgs] == [0, 1, 2, 3, 4]
    assert msgs[0].system_properties.tag == "TagA" and msgs[0].topic.name == TOPIC
    st, msgs, nxt = await pull(c, 1, "TagA")
    assert st.code == pb.OK and nxt == 5
    assert [m.body for m in msgs] == [b"m2", b"m4"]
    st, msgs, nxt = await pull(c, 100)
    # far past the end of a queue that starts at 0: the broker points back at 0
    assert st.code == pb.ILLEGAL_OFFSET and not msgs and nxt == 0

    # long polling: a pull at the end is answered by the next message
    began = time.monotonic()
    waiting = asyncio.ensure_future(pull(c, 5, poll_s=10))
    await asyncio.sleep(1)
    await send(c, "TagA", "m5")
    st, msgs, nxt = await waiting
    assert st.code == pb.OK and [m.body for m in msgs] == [b"m5"] and nxt == 6
    assert time.monotonic() - began < 8
    st, msgs, nxt = await pull(c, 6, qid=0, poll_s=5)  # nothing comes: after the poll time
    assert st.code == pb.MESSAGE_NOT_FOUND and nxt == 6

    g = c.stub.GetOffset
    r = await g(spb.GetOffsetRequest(group=pb.Resource(name=GROUP), message_queue=queue()),
                metadata=MD)
    # pulls commit nothing; a group without offset on a queue still at 0 gets 0 (4.9.8)
    assert (r.status.code, r.offset) == (pb.OK, 0)
    r = await c.stub.UpdateOffset(spb.UpdateOffsetRequest(
        group=pb.Resource(name=GROUP), message_queue=queue(), offset=3), metadata=MD)
    assert r.status.code == pb.OK
    r = await g(spb.GetOffsetRequest(group=pb.Resource(name=GROUP), message_queue=queue()),
                metadata=MD)
    assert (r.status.code, r.offset) == (pb.OK, 3)
    # the same offset as a 4.x client sees it
    got = await c.call(R.QUERY_CONSUMER_OFFSET, {"consumerGroup": GROUP, "topic": TOPIC,
                                                 "queueId": "0"})
    assert got.code == ResponseCode.SUCCESS and got.ext_fields["offset"] == "3"

    r = await g(spb.GetOffsetRequest(group=pb.Resource(name=GROUP), message_queue=queue(-1)),
                metadata=MD)
    assert r.status.code == pb.BAD_REQUEST
    r = await c.stub.UpdateOffset(spb.UpdateOffsetRequest(
        group=pb.Resource(name="bad group!"), message_queue=queue(), offset=1), metadata=MD)
    assert r.status.code == pb.ILLEGAL_CONSUMER_GROUP


def delayed(body: str, due_ms: int) -> pb.Message:
    return pb.Message(topic=pb.Resource(name=TOPIC), body=body.encode(),
                      system_properties=pb.SystemProperties(
                          message_id=uuid.uuid4().hex.upper(), tag="D",
                          message_type=pb.DELAY,
                          delivery_timestamp=Timestamp(seconds=due_ms // 1000)))


async def visible(c) -> list[bytes]:
    out = []
    for qid in range(4):
        r = await c.call(R.PULL_MESSAGE, pull_header("cg4", TOPIC, qid, 0, 32, 4, 0, 0, "*", 0,
                                                     "TAG", "broker-a"))
        if r.code == ResponseCode.SUCCESS:
            out += [m.body for m in decode_messages(r.body)]
    return out


async def test_recall_a_delayed_message(cluster):
    c = cluster
    due = (int(time.time()) + 4) * 1000
    sent = []
    for body in ("keep", "recall"):
        r = await c.stub.SendMessage(spb.SendMessageRequest(messages=[delayed(body, due)]),
                                     metadata=MD)
        assert r.status.code == pb.OK, r.status.message
        sent.append(r.entries[0])
    handle = sent[1].recall_handle
    fields = base64.urlsafe_b64decode(handle + "=" * (-len(handle) % 4)).decode().split(" ")
    assert fields[:3] == ["v1", TOPIC, "broker-a"] and fields[4] == sent[1].message_id
    assert due - 1000 < int(fields[3]) <= due
    r = await c.stub.RecallMessage(spb.RecallMessageRequest(
        topic=pb.Resource(name=TOPIC), recall_handle=handle), metadata=MD)
    assert r.status.code == pb.OK, r.status.message
    assert r.message_id == sent[1].message_id

    r = await c.stub.RecallMessage(spb.RecallMessageRequest(
        topic=pb.Resource(name=TOPIC), recall_handle="bm90IGEgaGFuZGxl"), metadata=MD)
    assert (r.status.code, r.status.message) == (pb.INTERNAL_SERVER_ERROR,
                                                 "recall handle is invalid")
    r = await c.call(R.UPDATE_AND_CREATE_TOPIC, {
        "topic": "T5Other", "defaultTopic": "TBW102", "readQueueNums": "1",
        "writeQueueNums": "1", "perm": "6", "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0", "order": "false"})
    r = await c.stub.RecallMessage(spb.RecallMessageRequest(
        topic=pb.Resource(name="T5Other"), recall_handle=handle), metadata=MD)
    assert r.status.code == pb.INTERNAL_SERVER_ERROR
    assert r.status.message == "recall failed, topic not match"


    async def kept_arrived() -> bool:
        return b"keep" in await visible(c)
    await wait_until(kept_arrived, 20, 0.3, "the delayed message arrived")
    await asyncio.sleep(2)
    assert await visible(c) == [b"keep"]  # the recalled one never comes
    late = await c.stub.RecallMessage(spb.RecallMessageRequest(
        topic=pb.Resource(name=TOPIC), recall_handle=sent[0].recall_handle), metadata=MD)
    assert late.status.message == "recall failed, timestamp invalid"

    # recallMessageEnable=false (5.3.3's default): FORBIDDEN
    r = await c.call(R.UPDATE_BROKER_CONFIG, body=b"recallMessageEnable=false\n")
    assert r.code == ResponseCode.SUCCESS
    again = delayed("off", (int(time.time()) + 30) * 1000)
    r = await c.stub.SendMessage(spb.SendMessageRequest(messages=[again]), metadata=MD)
    r = await c.stub.RecallMessage(spb.RecallMessageRequest(
        topic=pb.Resource(name=TOPIC), recall_handle=r.entries[0].recall_handle), metadata=MD)
    assert (r.status.code, r.status.message) == (pb.FORBIDDEN,
                                                 "recall failed, operation is forbidden")
