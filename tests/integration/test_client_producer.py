"""Every producer mode of ``rmq.client.Producer`` against real rmq-namesrv and
rmq-broker processes; what was sent is read back with the client's own pull
and query calls, so both directions of the codec are exercised."""

from __future__ import annotations

import asyncio
import collections
import time

import pytest
import pytest_asyncio

from rmq.client import (
    LitePullConsumer,
    Message,
    MessageQueue,
    MQClientError,
    Producer,
    PullStatus,
    SendStatus,
    select_by_hash,
)
from rmq.client.admin import MQAdmin
from rmq.common.message import COMPRESSED_FLAG, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from rmq.common.message_id import decode_message_id
from rmq.testing.cluster import Cluster
from rmq.testing.messaging import running_cluster

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(60)]
DELAYS = "messageDelayLevel=1s 2s 3s\n"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory):
    async with running_cluster(tmp_path_factory.mktemp("producer"), DELAYS) as c:
        yield c


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def producer(cluster):
    async with Producer("pg_modes", client_config=cluster.client_config("producer")) as p:
        yield p


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def reader(cluster):
    c = LitePullConsumer("cg_reader", client_config=cluster.client_config("reader"),
                         auto_commit=False)
    yield c
    await c.instance.remoting.close()


async def read_queue(reader: LitePullConsumer, mq: MessageQueue, offset: int = 0,
                     want: int = 1, timeout: float = 10.0) -> list:
    """Every message of ``mq`` from ``offset`` until ``want`` arrived."""
    out: list = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while len(out) < want:
        r = await reader.pull(mq, offset, 32)
        if r.status is PullStatus.FOUND:
            out.extend(r.messages)
            offset = r.next_begin_offset
            continue
        assert loop.time() < deadline, f"{len(out)}/{want} messages in {mq}"
        await asyncio.sleep(0.05)
    return out


def queue_of(result) -> MessageQueue:
    return result.message_queue


async def test_sync_send_result_and_round_trip(cluster, producer, reader):
    await cluster.create_topic("TopicSync", 4)
    msg = Message("TopicSync", b"hello", tags="TagA", keys=["k1", "k2"],
                  properties={"color": "blue", "size": "L"})
    r = await producer.send(msg)
    assert r.status is SendStatus.SEND_OK
    assert r.message_queue.topic == "TopicSync" and r.message_queue.broker_name == "broker-a"
    assert len(r.msg_id) == 32 and r.msg_id == msg.uniq_key
    (host, _commit_offset) = decode_message_id(r.offset_msg_id)
    assert host == ("127.0.0.1", cluster.port)
    (got,) = await read_queue(reader, queue_of(r), r.queue_offset)
    assert got.body == b"hello" and got.tags == "TagA" and got.keys == "k1 k2"
    assert got.properties["color"] == "blue" and got.properties["size"] == "L"
    assert got.msg_id == r.msg_id  # UNIQ_KEY is what the consumer sees as msg_id
    assert got.offset_msg_id == r.offset_msg_id
    assert got.queue_offset == r.queue_offset and got.sys_flag & COMPRESSED_FLAG == 0
    # round-robin over the four queues, offsets advance per queue
    results = [await producer.send(Message("TopicSync", b"%d" % i)) for i in range(8)]
    per_queue = collections.Counter(x.message_queue.queue_id for x in results)
    assert sorted(per_queue) == [0, 1, 2, 3] and set(per_queue.values()) == {2}


async def test_async_send_with_callback_and_future(cluster, producer, reader):
    await cluster.create_topic("TopicAsync", 2)
    seen: list = []
    done = asyncio.Event()

    def callback(result, error):
        seen.append((result, error))
        if len(seen) == 10:
            done.set()

    futures = [producer.send_async(Message("TopicAsync", b"cb%d" % i), callback=callback)
               for i in range(10)]
    await asyncio.wait_for(done.wait(), 10)
    assert all(err is None and res.status is SendStatus.SEND_OK for res, err in seen)
    results = await asyncio.gather(*futures)  # the same results through the futures
    assert {r.msg_id for r in results} == {res.msg_id for res, _ in seen}
    plain = await producer.send_async(Message("TopicAsync", b"future-only"))
    assert plain.status is SendStatus.SEND_OK
    got = await read_queue(reader, plain.message_queue, plain.queue_offset)
    assert got[0].body == b"future-only" and got[0].msg_id == plain.msg_id
    # an error reaches the callback, not the event loop
    errors: list = []
    fut = producer.send_async(Message("TopicAsync", b""), callback=lambda r, e: errors.append(e))
    with pytest.raises(MQClientError, match="body length is zero"):
        await fut
    assert len(errors) == 1 and "body length is zero" in str(errors[0])


async def test_oneway_send_arrives(cluster, producer, reader):
    await cluster.create_topic("TopicOneway", 1)
    for i in range(5):
        await producer.send_oneway(Message("TopicOneway", b"o%d" % i, keys="ow"))
    msgs = await read_queue(reader, MessageQueue("TopicOneway", "broker-a", 0), 0, 5)
    assert [m.body for m in msgs] == [b"o%d" % i for i in range(5)]
    assert all(m.keys == "ow" and m.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
               for m in msgs)


async def test_batch_send(cluster, producer, reader):
    await cluster.create_topic("TopicBatch", 2)
    msgs = [Message("TopicBatch", b"b%d" % i, tags="TB", keys=f"bk{i}",
                    properties={"n": str(i)}) for i in range(20)]
    r = await producer.send_batch(msgs)
    assert r.status is SendStatus.SEND_OK
    ids = r.msg_id.split(",")
    assert ids == [m.uniq_key for m in msgs] and len(set(ids)) == 20
    got = await read_queue(reader, r.message_queue, r.queue_offset, 20)
    assert [m.body for m in got] == [m.body for m in msgs]
    assert [m.queue_offset for m in got] == list(range(r.queue_offset, r.queue_offset + 20))
    assert [m.msg_id for m in got] == ids
    assert all(m.tags == "TB" and m.properties["n"] == str(i) for i, m in enumerate(got))
    with pytest.raises(MQClientError, match="same"):
        await producer.send_batch([Message("TopicBatch", b"x"), Message("TopicSync", b"y")])
    with pytest.raises(MQClientError, match="not supported for batching"):
        await producer.send_batch([Message("TopicBatch", b"x", delay_level=1)])


async def test_chosen_queue_and_selector_keep_order(cluster, producer, reader):
    await cluster.create_topic("TopicOrder", 4)
    queues = await producer.fetch_publish_queues("TopicOrder")
    assert [q.queue_id for q in queues] == [0, 1, 2, 3]
    r = await producer.send(Message("TopicOrder", b"chosen"), mq=queues[2])
    assert r.message_queue == queues[2]
    # orders spread over queues by hash of the order id; each order's steps in sequence
    sent: dict[int, list[bytes]] = collections.defaultdict(list)
    for step in range(5):
        for order in range(12):
            body = b"order%d-step%d" % (order, step)
            res = await producer.send(Message("TopicOrder", body), selector=select_by_hash,
                                      arg=order)
            assert res.message_queue.queue_id == order % 4  # Integer.hashCode = the value
            sent[res.message_queue.queue_id].append(body)
    for qid, bodies in sent.items():
        start = 1 if qid == 2 else 0  # the chosen-queue message came first
        got = await read_queue(reader, queues[qid], start, len(bodies))
        assert [m.body for m in got] == bodies
    key_queue = select_by_hash(queues, None, "order-xyz").queue_id
    res = await producer.send(Message("TopicOrder", b"k"), selector=select_by_hash,
                              arg="order-xyz")
    assert res.message_queue.queue_id == key_queue


async def test_delay_level_delivered_late(cluster, producer, reader):
    await cluster.create_topic("TopicDelay", 1)
    sent = time.monotonic()
    r = await producer.send(Message("TopicDelay", b"later", delay_level=2))
    assert r.status is SendStatus.SEND_OK
    mq = MessageQueue("TopicDelay", "broker-a", 0)
    assert (await reader.pull(mq, 0)).status is PullStatus.NO_NEW_MSG
    (got,) = await read_queue(reader, mq, 0, 1, timeout=10)
    waited = time.monotonic() - sent
    assert 2.0 <= waited <= 4.0, waited  # level 2 = 2 s in this broker
    assert got.body == b"later" and got.msg_id == r.msg_id
    assert got.properties["REAL_TOPIC"] == "TopicDelay"


async def test_compression_round_trip(cluster, producer, reader):
    await cluster.create_topic("TopicBig", 1)
    body = (b"0123456789abcdef" * 512) + bytes(range(256)) * 4  # 9 KiB, compressible
    small = b"s" * 4095
    r_big = await producer.send(Message("TopicBig", body, keys="big"))
    r_small = await producer.send(Message("TopicBig", small))
    big, little = await read_queue(reader, r_big.message_queue, r_big.queue_offset, 2)
    assert big.body == body and big.sys_flag & COMPRESSED_FLAG
    assert big.sys_flag & 0x700 == 0x300  # zlib compression type
    assert big.store_size < len(body) // 2  # stored compressed
    assert little.msg_id == r_small.msg_id
    assert little.body == small and not little.sys_flag & COMPRESSED_FLAG
    assert little.store_size > len(small)
    async with MQAdmin(cluster.namesrv_addr) as admin:  # and by id through VIEW_MESSAGE_BY_ID
        viewed = await admin.view_message(r_big.offset_msg_id)
    assert viewed.body == body and viewed.msg_id == r_big.msg_id


async def test_retry_on_another_broker_when_one_fails(cluster, tmp_path):
    second = Cluster(tmp_path, DELAYS, broker_name="broker-b", share_namesrv=cluster)
    try:
        second.start_broker()
        await cluster.create_topic("TopicTwo", 2)
        await second.create_topic("TopicTwo", 2)
        await wait_until_two_brokers(cluster, "TopicTwo")
        async with Producer("pg_two", client_config=cluster.client_config("two")) as p:
            queues = await p.fetch_publish_queues("TopicTwo")
            assert {q.broker_name for q in queues} == {"broker-a", "broker-b"}
            first = [await p.send(Message("TopicTwo", b"%d" % i)) for i in range(4)]
            assert {r.message_queue.broker_name for r in first} == {"broker-a", "broker-b"}
            # Either a send fails on broker-b and the producer retries on broker-a
            # (quarantining broker-b), or the route already dropped broker-b (the name
            # server removes a broker whose connection closed): which one comes first is
            # a race, the outcome is the same.
            second.broker.kill()
            results = [await p.send(Message("TopicTwo", b"after%d" % i), timeout_ms=5000)
                       for i in range(6)]
        assert all(r.status is SendStatus.SEND_OK for r in results)
        assert {r.message_queue.broker_name for r in results} == {"broker-a"}
    finally:
        await second.close()


async def wait_until_two_brokers(cluster: Cluster, topic: str) -> None:
    async with MQAdmin(cluster.namesrv_addr) as admin:
        for _ in range(150):
            route = await admin.topic_route(topic)
            if {q.brokerName for q in route.queueDatas} == {"broker-a", "broker-b"}:
                return
            await asyncio.sleep(0.1)
    raise AssertionError(f"{topic} never routed to both brokers")


async def test_invalid_messages_are_refused_locally(producer):
    with pytest.raises(MQClientError, match="body length is zero"):
        await producer.send(Message("TopicSync", b""))
    with pytest.raises(MQClientError, match="over max value"):
        await producer.send(Message("TopicSync", b"x" * (4 * 1024 * 1024 + 1)))
    with pytest.raises(MQClientError):
        await producer.send(Message("bad topic!", b"x"))  # validate_topic
