"""``rmq.client.PushConsumer`` against real rmq-namesrv and rmq-broker processes:
clustering rebalance on join and leave, broadcasting, orderly consumption with
broker locks, consume-from-where for new groups, the retry path and offset
commits on shutdown."""

from __future__ import annotations

import asyncio
import collections
import time

import orjson
import pytest
import pytest_asyncio

from rmq.client import (
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    ConsumerConfig,
    ConsumeStatus,
    Message,
    MessageModel,
    MessageQueue,
    Producer,
    PushConsumer,
    select_by_hash,
)
from rmq.client.exceptions import MQClientError
from rmq.common.codes import RequestCode, ResponseCode
from rmq.testing.cluster import Cluster
from rmq.testing.messaging import running_cluster
from rmq.testing.wait import wait_until

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(60)]
DELAYS = "messageDelayLevel=1s 1s 1s 1s 1s 1s 1s\n"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory):
    async with running_cluster(tmp_path_factory.mktemp("push"), DELAYS) as c:
        yield c


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def producer(cluster):
    async with Producer("pg_push", client_config=cluster.client_config("push-producer")) as p:
        yield p


class Deliveries:
    """Every delivery as (consumer, queue id, queue offset, body)."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, int, int, bytes]] = []

    def listener(self, name: str):
        def on_messages(msgs, ctx):
            for m in msgs:
                self.rows.append((name, m.queue_id, m.queue_offset, m.body))
            return ConsumeStatus.CONSUME_SUCCESS
        return on_messages

    def bodies(self, name: str | None = None) -> collections.Counter:
        return collections.Counter(r[3] for r in self.rows if name is None or r[0] == name)

    def duplicates(self) -> int:
        c = self.bodies()
        return sum(c.values()) - len(c)


def consumer(cluster: Cluster, group: str, name: str, listener, topic: str,
             orderly: bool = False, **config) -> PushConsumer:
    cfg = ConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    for k, v in config.items():
        setattr(cfg, k, v)
    c = PushConsumer(group, listener=listener, orderly=orderly, config=cfg,
                     client_config=cluster.client_config(name))
    c.subscribe(topic, "*")
    return c


def owned(c: PushConsumer, topic: str) -> set[int]:
    return {mq.queue_id for mq in c.owned_queues() if mq.topic == topic}


async def send_range(producer: Producer, topic: str, start: int, stop: int,
                     pause: float = 0.0) -> None:
    for i in range(start, stop):
        await producer.send(Message(topic, b"m%d" % i))
        if pause:
            await asyncio.sleep(pause)


async def committed(cluster: Cluster, group: str, topic: str, queue_id: int) -> int:
    r = await cluster.call(RequestCode.QUERY_CONSUMER_OFFSET, {
        "consumerGroup": group, "topic": topic, "queueId": str(queue_id)})
    return int(r.ext_fields["offset"]) if r.code == ResponseCode.SUCCESS else -1


async def test_rebalance_on_join_and_leave(cluster, producer):
    topic, group = "TopicRebal", "cg_rebal"
    await cluster.create_topic(topic, 8)
    d = Deliveries()
    a = consumer(cluster, group, "rebal-a", d.listener("a"), topic)
    await a.start()
    b = consumer(cluster, group, "rebal-b", d.listener("b"), topic)
    try:
        await wait_until(lambda: len(owned(a, topic)) == 8, 10)
        await send_range(producer, topic, 0, 200)
        await wait_until(lambda: len(d.bodies()) == 200, 20)
        assert d.duplicates() == 0 and set(d.bodies("a")) == set(d.bodies())
        # join while messages keep flowing: the queues split 4/4
        sending = asyncio.ensure_future(send_range(producer, topic, 200, 600, 0.002))
        await b.start()
        await wait_until(lambda: len(owned(a, topic)) == 4 and len(owned(b, topic)) == 4, 15)
        assert owned(a, topic).isdisjoint(owned(b, topic))
        await sending
        await wait_until(lambda: len(d.bodies()) == 600, 20)
        joined_dups = d.duplicates()
        moved = owned(b, topic)
        # a duplicate can only be a message of a queue that moved, which the old
        # owner consumed but had not committed when the new owner started
        dup_rows = [r for r in d.rows if d.bodies()[r[3]] > 1]
        assert {r[1] for r in dup_rows} <= moved
        assert joined_dups <= 32 * len(moved), joined_dups
        assert {r[1] for r in d.rows[-100:] if r[0] == "b"} <= moved
        # leave: b commits synchronously before it unregisters -> no duplicates
        sending = asyncio.ensure_future(send_range(producer, topic, 600, 1000, 0.002))
        await b.shutdown()
        await wait_until(lambda: len(owned(a, topic)) == 8, 15)
        await sending
        await wait_until(lambda: len(d.bodies()) == 1000, 20)
        await asyncio.sleep(0.3)
        print(f"duplicates on join: {joined_dups}, on leave: {d.duplicates() - joined_dups}")
        assert d.duplicates() == joined_dups
        assert set(d.bodies()) == {b"m%d" % i for i in range(1000)}  # nothing lost
    finally:
        await a.shutdown()
        if b._running:
            await b.shutdown()
    # clean shutdown committed every queue to its end
    for qid in range(8):
        mx = await cluster.call(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(qid)})
        assert await committed(cluster, group, topic, qid) == int(mx.ext_fields["offset"])


async def test_shutdown_commits_and_restart_resumes(cluster, producer):
    topic, group = "TopicResume", "cg_resume"
    await cluster.create_topic(topic, 2)
    d = Deliveries()
    c1 = consumer(cluster, group, "resume-1", d.listener("1"), topic)
    await c1.start()
    await send_range(producer, topic, 0, 50)
    await wait_until(lambda: len(d.bodies()) == 50, 15)
    await c1.shutdown()
    assert [await committed(cluster, group, topic, q) for q in (0, 1)] == [25, 25]
    await send_range(producer, topic, 50, 60)
    c2 = consumer(cluster, group, "resume-2", d.listener("2"), topic)
    await c2.start()
    try:
        await wait_until(lambda: len(d.bodies()) == 60, 15)
        await asyncio.sleep(0.3)
    finally:
        await c2.shutdown()
    assert set(d.bodies("2")) == {b"m%d" % i for i in range(50, 60)} and d.duplicates() == 0


async def test_broadcasting_every_consumer_gets_everything(cluster, producer, tmp_path):
    topic, group = "TopicBcast", "cg_bcast"
    await cluster.create_topic(topic, 4)
    d = Deliveries()
    names = ("x", "y", "z")
    consumers = [consumer(cluster, group, f"bcast-{n}", d.listener(n), topic,
                          message_model=MessageModel.BROADCASTING,
                          offset_store_dir=str(tmp_path / "offsets")) for n in names]
    for c in consumers:
        await c.start()
    try:
        for c in consumers:
            assert owned(c, topic) == {0, 1, 2, 3}
        await send_range(producer, topic, 0, 40)
        await wait_until(lambda: all(len(d.bodies(n)) == 40 for n in names), 15)
        await asyncio.sleep(0.3)
        assert all(set(d.bodies(n).values()) == {1} for n in names)
    finally:
        for c in consumers:  # each leave notifies the others while they stop
            begin = time.monotonic()
            await c.shutdown()
            assert time.monotonic() - begin < 5  # no lost cancellation in the rebalancer
    # local offsets, one file per client id, each at the end of every queue
    for c in consumers:
        path = tmp_path / "offsets" / c.instance.client_id / group / "offsets.json"
        table = orjson.loads(path.read_bytes())["offsetTable"]
        got = {MessageQueue.from_json_obj(orjson.loads(k)).queue_id: v for k, v in table.items()}
        assert got == {0: 10, 1: 10, 2: 10, 3: 10}
    # the broker holds no offsets for a broadcasting group
    assert await committed(cluster, group, topic, 0) in (-1, 0)
    # a restarted broadcasting consumer resumes from its local offsets
    again = consumer(cluster, group, "bcast-x", d.listener("x2"), topic,
                     message_model=MessageModel.BROADCASTING,
                     offset_store_dir=str(tmp_path / "offsets"))
    assert again.instance.client_id == consumers[0].instance.client_id
    await again.start()
    try:
        await send_range(producer, topic, 40, 44)
        await wait_until(lambda: len(d.bodies("x2")) == 4, 15)
        await asyncio.sleep(0.3)
    finally:
        await again.shutdown()
    assert set(d.bodies("x2")) == {b"m%d" % i for i in range(40, 44)}


async def test_orderly_per_queue_under_concurrent_sends(cluster, producer):
    topic, group = "TopicOrderly", "cg_orderly"
    await cluster.create_topic(topic, 4)
    seen: list[tuple[str, int, int, bytes]] = []
    active: set[int] = set()
    overlaps: list[int] = []

    def listener(name):
        async def on_messages(msgs, ctx):
            qid = ctx.message_queue.queue_id
            if qid in active:
                overlaps.append(qid)
            active.add(qid)
            await asyncio.sleep(0.001)  # let other queues' batches interleave
            for m in msgs:
                seen.append((name, m.queue_id, m.queue_offset, m.body))
            active.discard(qid)
            return ConsumeOrderlyStatus.SUCCESS
        return on_messages

    consumers = [consumer(cluster, group, f"orderly-{n}", listener(n), topic, orderly=True,
                          consume_message_batch_max_size=3) for n in ("p", "q")]
    for c in consumers:
        await c.start()
    try:
        await wait_until(lambda: sum(len(owned(c, topic)) for c in consumers) == 4
                         and all(len(owned(c, topic)) == 2 for c in consumers), 15)
        # the broker holds the locks: another client id of the group gets none
        body = orjson.dumps({"clientId": "127.0.0.1@intruder", "consumerGroup": group,
                             "mqSet": [MessageQueue(topic, "broker-a", q).to_json_obj()
                                       for q in range(4)]})
        r = await cluster.call(RequestCode.LOCK_BATCH_MQ, None, body)
        assert r.code == ResponseCode.SUCCESS and orjson.loads(r.body)["lockOKMQSet"] == []
        assert all(pq.locked for c in consumers for pq in c.pqs.values())

        async def orders(first: int) -> None:
            for step in range(15):
                for order in range(first, first + 4):
                    await producer.send(Message(topic, b"%d:%d" % (order, step)),
                                        selector=select_by_hash, arg=order)

        await asyncio.gather(orders(0), orders(4), orders(8))
        await wait_until(lambda: len(seen) == 12 * 15, 20)
    finally:
        for c in consumers:
            await c.shutdown()
    assert not overlaps  # one batch at a time per queue
    by_queue: dict[int, list[int]] = collections.defaultdict(list)
    by_order: dict[int, list[int]] = collections.defaultdict(list)
    owner: dict[int, set[str]] = collections.defaultdict(set)
    for name, qid, offset, text in seen:
        by_queue[qid].append(offset)
        owner[qid].add(name)
        order, step = map(int, text.split(b":"))
        by_order[order].append(step)
    assert all(offs == list(range(len(offs))) for offs in by_queue.values())
    assert all(steps == list(range(15)) for steps in by_order.values())
    assert all(len(names) == 1 for names in owner.values())
    # the locks were released on shutdown: the intruder gets them now
    r = await cluster.call(RequestCode.LOCK_BATCH_MQ, None, body)
    assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
    assert len(orjson.loads(r.body)["lockOKMQSet"]) == 4


async def test_retry_path_redelivers_through_the_retry_topic(cluster, producer):
    topic, group = "TopicRetry", "cg_retry"
    await cluster.create_topic(topic, 1)
    deliveries: list = []

    def listener(msgs, ctx):
        deliveries.extend((time.monotonic(), m) for m in msgs)
        m = msgs[0]
        if m.body == b"raise" and m.reconsume_times == 0:
            raise RuntimeError("listener failure")
        if m.reconsume_times == 0:
            ctx.delay_level_when_next_consume = 1
            return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS

    c = consumer(cluster, group, "retry", listener, topic)
    await c.start()
    try:
        sent = [await producer.send(Message(topic, body, tags="R", keys="rk"))
                for body in (b"later", b"raise")]
        await wait_until(lambda: len(deliveries) == 4, 20)
        await asyncio.sleep(0.5)
    finally:
        await c.shutdown()
    assert len(deliveries) == 4
    firsts = [m for _, m in deliveries if m.reconsume_times == 0]
    again = [m for _, m in deliveries if m.reconsume_times == 1]
    assert sorted(m.body for m in firsts) == sorted(m.body for m in again) == [b"later", b"raise"]
    for m in again:
        assert m.topic == topic  # restored from RETRY_TOPIC
        assert m.properties["RETRY_TOPIC"] == topic and m.tags == "R" and m.keys == "rk"
        assert m.msg_id in {r.msg_id for r in sent}  # same client id
        assert m.properties.get("ORIGIN_MESSAGE_ID")
    t_first = min(t for t, m in deliveries if m.body == b"later")
    t_again = max(t for t, m in deliveries if m.body == b"later")
    assert t_again - t_first >= 0.9  # delay level 1 = 1 s in this broker
    # the retry topic now has both messages, and the group committed them
    assert await committed(cluster, group, f"%RETRY%{group}", 0) == 2
    assert await committed(cluster, group, topic, 0) == 2


async def test_consume_from_where_for_new_groups(tmp_path):
    # accessMessageInMemoryMaxRatio=0: the first message never counts as "in
    # memory", so the broker answers QUERY_NOT_FOUND for a new group (4.9.8
    # would hand out offset 0 otherwise) and the client's choice decides
    c = Cluster(tmp_path, "accessMessageInMemoryMaxRatio=0\n")
    try:
        c.start_broker()
        await c.create_topic("TopicWhere", 1)
        async with Producer("pg_where", client_config=c.client_config("where-p")) as p:
            await send_range(p, "TopicWhere", 0, 5)
            # SEARCH_OFFSET_BY_TIMESTAMP answers the nearest message (4.9.8): put
            # the time just before the second batch
            await asyncio.sleep(1.0)
            middle = int(time.time() * 1000)
            await asyncio.sleep(0.05)
            await send_range(p, "TopicWhere", 5, 10)
            d = Deliveries()
            modes = {"first": ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                     "last": ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                     "time": ConsumeFromWhere.CONSUME_FROM_TIMESTAMP}
            consumers = [consumer(c, f"cg_where_{name}", f"where-{name}", d.listener(name),
                                  "TopicWhere", consume_from_where=mode,
                                  consume_timestamp=middle)
                         for name, mode in modes.items()]
            for x in consumers:
                await x.start()
            try:
                await wait_until(lambda: all(len(x.owned_queues()) >= 1 for x in consumers), 10)
                await send_range(p, "TopicWhere", 10, 12)
                await wait_until(lambda: len(d.bodies("last")) == 2, 15)
                await wait_until(lambda: len(d.bodies("first")) == 12, 15)
                await wait_until(lambda: len(d.bodies("time")) == 7, 15)
            finally:
                for x in consumers:
                    await x.shutdown()
        assert set(d.bodies("last")) == {b"m10", b"m11"}
        assert set(d.bodies("first")) == {b"m%d" % i for i in range(12)}
        assert set(d.bodies("time")) == {b"m%d" % i for i in range(5, 12)}
    finally:
        await c.close()


async def test_consumption_resumes_soon_after_the_broker_restarts(tmp_path):
    """A broker killed and restarted knows no consumer group until it hears a
    heartbeat, and answers pulls SUBSCRIPTION_NOT_EXIST until then: the push
    consumer heartbeats at once instead of waiting for its 30 s period."""
    from tests.integration.admin_cli import recording_consumer

    async with running_cluster(tmp_path) as c:
        await c.create_topic("TopicRestart", queues=1)
        async with recording_consumer(c, "cgRestart", "TopicRestart", "*", 0) as (rc, got), \
                Producer("pgRestart", client_config=c.client_config("restart-p")) as p:
            await wait_until(lambda: owned(rc, "TopicRestart"), 10)
            await p.send(Message("TopicRestart", b"before"))
            await wait_until(lambda: len(got) == 1, 10)
            c.broker.kill()
            c.start_broker()
            await c.wait_routable("TopicRestart")
            deadline = time.monotonic() + 20
            while True:
                try:
                    await p.send(Message("TopicRestart", b"after"))
                    break
                except MQClientError:
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.2)
            sent = time.monotonic()
            await wait_until(lambda: len(got) == 2, 12)
            assert time.monotonic() - sent < 12
