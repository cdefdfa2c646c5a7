"""Request/reply through real rmq-namesrv and rmq-broker processes: a requester
``Producer.request`` (sync, async with a callback, with a selector and with a
queue), a responder that consumes the request and answers with
``create_reply_message``, the broker's PUSH_REPLY_MESSAGE_TO_CLIENT, timeouts,
and the broker's refusal when the requester is gone."""

from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio

from rmq.client import (
    ConsumeFromWhere,
    ConsumerConfig,
    ConsumeStatus,
    Message,
    Producer,
    PushConsumer,
)
from rmq.client.exceptions import MQBrokerError, MQClientError
from rmq.client.request_reply import RequestTimeoutError, create_reply_message
from rmq.common import message as mc
from rmq.testing.messaging import running_cluster

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(90)]
TOPIC = "RequestTopic"
SILENT = "NobodyAnswers"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory):
    async with running_cluster(tmp_path_factory.mktemp("reply")) as c:
        await c.create_topic(TOPIC, queues=4)
        await c.create_topic(SILENT, queues=2)
        yield c


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def responder(cluster):
    """Consumes requests and answers each with the body upper-cased."""
    replier = Producer("pg_replier", client_config=cluster.client_config("replier"))
    await replier.start()
    seen: list = []

    async def answer(msgs, ctx):
        for m in msgs:
            seen.append(m)
            if m.body == b"no answer":
                continue
            reply = create_reply_message(m, m.body.upper())
            reply.properties["answeredQueue"] = str(m.queue_id)
            await replier.send(reply)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("cg_responder", listener=answer,
                            config=ConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET),
                            client_config=cluster.client_config("responder"))
    consumer.subscribe(TOPIC, "*")
    await consumer.start()
    yield seen
    await consumer.shutdown()
    await replier.shutdown()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def requester(cluster, responder):
    async with Producer("pg_requester", client_config=cluster.client_config("requester")) as p:
        # the responder's first rebalance: wait until a request is answered
        for _ in range(100):
            try:
                await p.request(Message(TOPIC, b"warm up"), timeout_ms=1000)
                break
            except RequestTimeoutError:
                continue
        yield p


async def test_a_request_gets_its_reply(requester, responder):
    msg = Message(TOPIC, b"hello", tags="greet", keys="k1")
    reply = await requester.request(msg, timeout_ms=5000)
    assert reply.body == b"HELLO"
    assert reply.topic == "DefaultCluster_REPLY_TOPIC"
    props = reply.properties
    assert props[mc.PROPERTY_CORRELATION_ID] == msg.properties[mc.PROPERTY_CORRELATION_ID]
    assert props[mc.PROPERTY_MESSAGE_REPLY_TO_CLIENT] == requester.instance.client_id
    assert props[mc.PROPERTY_MESSAGE_TYPE] == "reply" and props[mc.PROPERTY_MESSAGE_TTL] == "5000"
    assert int(props[mc.PROPERTY_PUSH_REPLY_TIME]) <= int(props[mc.PROPERTY_REPLY_MESSAGE_ARRIVE_TIME])
    # what the responder consumed was the stamped request, with the broker's cluster
    request = next(m for m in responder if m.body == b"hello")
    assert request.properties[mc.PROPERTY_CLUSTER] == "DefaultCluster"
    assert request.properties[mc.PROPERTY_CORRELATION_ID] == props[mc.PROPERTY_CORRELATION_ID]
    assert len(requester.instance.requests) == 0


async def test_concurrent_requests_are_matched_by_correlation_id(requester):
    bodies = [f"req-{i}".encode() for i in range(50)]
    replies = await asyncio.gather(*(requester.request(Message(TOPIC, b), timeout_ms=10_000) for b in bodies))
    assert [r.body for r in replies] == [b.upper() for b in bodies]


async def test_async_request_with_callback_selector_and_queue(requester):
    got: list = []
    done = asyncio.Event()

    def callback(reply, error):
        got.append((reply, error))
        done.set()

    requester.request_async(Message(TOPIC, b"async"), callback, timeout_ms=5000)
    await asyncio.wait_for(done.wait(), 10)
    assert got[0][1] is None and got[0][0].body == b"ASYNC"

    def third(queues, msg, arg):
        return queues[arg]

    reply = await requester.request(Message(TOPIC, b"selected"), 5000, selector=third, arg=2)
    assert reply.properties["answeredQueue"] == "2"
    queues = await requester.fetch_publish_queues(TOPIC)
    reply = await requester.request(Message(TOPIC, b"queued"), 5000, mq=queues[1])
    assert reply.properties["answeredQueue"] == "1"


async def test_no_reply_times_out_with_4_9_8s_message(requester):
    with pytest.raises(RequestTimeoutError) as e:
        await requester.request(Message(SILENT, b"anyone?"), timeout_ms=600)
    assert e.value.code == 10006
    assert f"send request message to <{SILENT}> OK, but wait reply message timeout, 600 ms." in str(e.value)
    errors: list = []
    fut = requester.request_async(Message(SILENT, b"async anyone?"), lambda r, err: errors.append(err), 300)
    with pytest.raises(RequestTimeoutError):
        await fut
    assert isinstance(errors[0], RequestTimeoutError)
    assert len(requester.instance.requests) == 0


async def test_reply_needs_a_cluster_and_a_live_requester(cluster, requester):
    with pytest.raises(MQClientError) as e:
        create_reply_message(Message(TOPIC, b"x"), b"y")
    assert "property[CLUSTER] is null" in str(e.value)
    async with Producer("pg_orphan", client_config=cluster.client_config("orphan")) as p:
        orphan = Message("DefaultCluster_REPLY_TOPIC", b"late")
        orphan.properties.update({mc.PROPERTY_MESSAGE_TYPE: "reply", mc.PROPERTY_CORRELATION_ID: "nobody",
                                  mc.PROPERTY_MESSAGE_REPLY_TO_CLIENT: "10.9.9.9@gone"})
        with pytest.raises(MQBrokerError) as e:
            await p.send(orphan)
        assert "channel of <10.9.9.9@gone> not found" in str(e.value)
    # a reply nobody waits for is acknowledged and dropped by the requester
    stray = Message("DefaultCluster_REPLY_TOPIC", b"stray")
    stray.properties.update({mc.PROPERTY_MESSAGE_TYPE: "reply", mc.PROPERTY_CORRELATION_ID: "unknown-id",
                             mc.PROPERTY_MESSAGE_REPLY_TO_CLIENT: requester.instance.client_id})
    result = await requester.send(stray)
    assert result.status.name == "SEND_OK"
    reply = await requester.request(Message(TOPIC, b"still fine"), timeout_ms=5000)
    assert reply.body == b"STILL FINE"
