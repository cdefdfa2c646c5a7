"""POP consumption against a real rmq-namesrv + rmq-broker: pop, ack (seen by
the absence of redelivery), change invisible time, long polling, NOTIFICATION,
orderly pop, revive into the retry topic, DLQ after retryMaxTimes, and a
SIGKILL of the broker between pops and acks."""

from __future__ import annotations

import asyncio
import time
import urllib.request

import orjson
import pytest

from rmq.client.pop import PopClient, handle_of
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.exceptions import RemotingError
from rmq.testing.cluster import Cluster
from rmq.testing.wait import wait_until
from tests.integration.test_messaging_raw import props, send

R = RequestCode
RC = ResponseCode
G = "popGroup"


@pytest.fixture
async def cluster(tmp_path):
    c = Cluster(tmp_path, "flushConsumerOffsetInterval=60000\n")
    c.start_broker()
    yield c
    await c.close()


async def fill(c: Cluster, topic: str, n: int, queues: int = 4) -> None:
    for i in range(n):
        r = await send(c, topic, f"m{i}".encode(), i % queues, props(TAGS=f"T{i % 2}"))
        assert r.code == RC.SUCCESS, r.remark


async def pop_all(p: PopClient, topic: str, want: int, invisible_ms: int, timeout: float = 10.0,
                  **kw) -> list:
    got: list = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        try:
            r = await p.pop(G, topic, invisible_ms=invisible_ms, max_nums=32, **kw)
        except RemotingError:  # the broker restarting
            await asyncio.sleep(0.1)
            continue
        if r.code == RC.SUCCESS:
            got.extend(r.messages)
        else:
            assert r.code == RC.POLLING_TIMEOUT and r.remark == "NO_MESSAGE_IN_QUEUE"
            await asyncio.sleep(0.05)
    return got


async def create_group(c: Cluster, group: str, orderly: bool = False,
                       retry_max: int = 16) -> None:
    body = orjson.dumps({"groupName": group, "consumeEnable": True, "consumeFromMinEnable": True,
                         "consumeBroadcastEnable": True, "consumeMessageOrderly": orderly,
                         "retryQueueNums": 1, "retryMaxTimes": retry_max, "brokerId": 0,
                         "whichBrokerWhenConsumeSlowly": 1,
                         "notifyConsumerIdsChangedEnable": True, "groupSysFlag": 0,
                         "consumeTimeoutMinute": 15, "attributes": {}})
    r = await c.call(R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body)
    assert r.code == RC.SUCCESS, r.remark


@pytest.mark.timeout(120)
async def test_pop_ack_and_revive(cluster):
    c = cluster
    await c.create_topic("PopT")
    p = PopClient(c.addr, "broker-a", c.client)
    r = await p.pop(G, "PopT", invisible_ms=2000)
    assert r.code == RC.POLLING_TIMEOUT and r.remark == "NO_MESSAGE_IN_QUEUE"
    await fill(c, "PopT", 8)
    got = await pop_all(p, "PopT", 8, 2000)
    assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in range(8))
    assert all(m.properties["POP_CK"].split(" ")[5] == "broker-a" for m in got)
    # ack the even ones; the odd ones come back through the retry topic
    acked = {m.body for m in got if int(m.body[1:]) % 2 == 0}
    for m in got:
        if m.body in acked:
            assert (await p.ack(G, "PopT", handle_of(m))).code == RC.SUCCESS
    popped_at = time.monotonic()
    again = await pop_all(p, "PopT", 4, 2000, timeout=8)
    late = time.monotonic() - popped_at
    assert sorted(m.body for m in again) == sorted(b for b in (m.body for m in got)
                                                  if b not in acked)
    assert late < 2 + 1.5, late
    assert all(m.reconsume_times == 1 and m.topic == "PopT" for m in again)
    for m in again:  # handles from the retry topic ack as well
        assert (await p.ack(G, "PopT", handle_of(m))).code == RC.SUCCESS
    await asyncio.sleep(2.8)
    r = await p.pop(G, "PopT", invisible_ms=2000)
    assert r.code == RC.POLLING_TIMEOUT, [m.body for m in r.messages]
    # peek shows nothing left for the group; a single queue pop works too
    await fill(c, "PopT", 4)
    r = await p.pop(G, "PopT", queue_id=1, invisible_ms=5000)
    assert [m.queue_id for m in r.messages] == [1]
    info = r.messages[0].properties["POP_CK"].split(" ")
    assert info[6] == "1" and info[0] == info[7]


@pytest.mark.timeout(60)
async def test_redelivery_is_on_time(cluster):
    c = cluster
    await c.create_topic("PopR", queues=1)
    p = PopClient(c.addr, "broker-a", c.client)
    await fill(c, "PopR", 1, queues=1)
    first = await p.pop(G, "PopR", invisible_ms=1000)
    assert first.code == RC.SUCCESS
    due_ms = first.pop_time + 1000
    again = await p.pop(G, "PopR", invisible_ms=1000, poll_ms=5000)
    seen_ms = time.time() * 1000
    assert [m.body for m in again.messages] == [b"m0"]
    late = seen_ms - due_ms
    assert 0 <= late < 1000, late  # 5.3.3: 2.6-3.6 s late
    m = again.messages[0]
    assert m.properties["1ST_POP_TIME"] == str(first.pop_time)
    assert m.properties["RETRY_TOPIC"] == "PopR" and m.reconsume_times == 1


@pytest.mark.timeout(120)
async def test_change_invisible_longer_shorter_then_ack(cluster):
    c = cluster
    await c.create_topic("PopC", queues=1)
    p = PopClient(c.addr, "broker-a", c.client)
    await fill(c, "PopC", 2, queues=1)
    got = await pop_all(p, "PopC", 2, 1500)
    a, b = sorted(got, key=lambda m: m.body)
    r, ha = await p.change_invisible(G, "PopC", handle_of(a), 6000)  # longer
    assert r.code == RC.SUCCESS and ha is not None
    r, hb = await p.change_invisible(G, "PopC", handle_of(b), 300)  # shorter
    assert r.code == RC.SUCCESS
    back = await pop_all(p, "PopC", 1, 1500, timeout=4)
    assert [m.body for m in back] == [b.body]  # a stays invisible
    # ack with the handle the change returned sticks (no redelivery of a)
    assert (await p.ack(G, "PopC", ha)).code == RC.SUCCESS
    assert (await p.ack(G, "PopC", handle_of(back[0]))).code == RC.SUCCESS
    await asyncio.sleep(7)
    r = await p.pop(G, "PopC", invisible_ms=1500)
    assert r.code == RC.POLLING_TIMEOUT, [m.body for m in r.messages]


@pytest.mark.timeout(60)
async def test_long_polling_and_notification(cluster):
    c = cluster
    await c.create_topic("PopL", queues=2)
    p = PopClient(c.addr, "broker-a", c.client)
    t0 = time.monotonic()
    r = await p.pop(G, "PopL", invisible_ms=3000, poll_ms=600)
    assert r.code == RC.POLLING_TIMEOUT and time.monotonic() - t0 >= 0.55
    waiting = asyncio.ensure_future(p.pop(G, "PopL", invisible_ms=3000, poll_ms=5000))
    note = asyncio.ensure_future(c.call(R.NOTIFICATION, {
        "consumerGroup": G, "topic": "PopL", "queueId": "-1", "pollTime": "5000",
        "bornTime": str(int(time.time() * 1000))}, timeout_ms=8000))

    async def both_polling() -> bool:
        info = await c.call(R.POLLING_INFO, {"consumerGroup": G, "topic": "PopL", "queueId": "-1"})
        assert info.code == RC.SUCCESS and int(info.ext_fields["pollingNum"]) == 2, info
        return True
    await wait_until(both_polling, 5, what="the pop and the notification suspended")
    t1 = time.monotonic()
    await fill(c, "PopL", 1)
    r = await waiting
    assert r.code == RC.SUCCESS and time.monotonic() - t1 < 1.5
    n = await note
    assert n.code == RC.SUCCESS and n.ext_fields["hasMsg"] in ("true", "false")
    # a stale bornTime is answered at once
    r = await c.call(R.POP_MESSAGE, {"consumerGroup": G, "topic": "PopL", "queueId": "-1",
                                     "maxMsgNums": "1", "invisibleTime": "1000",
                                     "pollTime": "1000", "bornTime": "1"})
    assert r.code == RC.POLLING_TIMEOUT


@pytest.mark.timeout(90)
async def test_orderly_pop_blocks_queue_until_acked(cluster):
    c = cluster
    await c.create_topic("PopO", queues=1)
    await create_group(c, G, orderly=True)
    p = PopClient(c.addr, "broker-a", c.client)
    await fill(c, "PopO", 3, queues=1)
    r = await p.pop(G, "PopO", max_nums=2, invisible_ms=1500)
    assert r.code == RC.SUCCESS and r.revive_qid == 999
    assert [m.body for m in r.messages] == [b"m0", b"m1"]
    assert (await p.pop(G, "PopO", invisible_ms=1500)).code == RC.POLLING_TIMEOUT  # blocked
    await asyncio.sleep(1.7)
    r2 = await p.pop(G, "PopO", max_nums=2, invisible_ms=3000)  # same batch, counted
    assert [m.body for m in r2.messages] == [b"m0", b"m1"]
    assert all(m.reconsume_times == 1 for m in r2.messages)
    for m in r2.messages:
        assert (await p.ack(G, "PopO", handle_of(m))).code == RC.SUCCESS
    r3 = await p.pop(G, "PopO", invisible_ms=3000)
    assert [m.body for m in r3.messages] == [b"m2"]


@pytest.mark.timeout(120)
async def test_dlq_after_retry_max_times(cluster):
    c = cluster
    await c.create_topic("PopD", queues=1)
    await create_group(c, G, retry_max=1)
    p = PopClient(c.addr, "broker-a", c.client)
    await fill(c, "PopD", 1, queues=1)
    first = await pop_all(p, "PopD", 1, 1000)
    assert first[0].reconsume_times == 0
    second = await pop_all(p, "PopD", 1, 1000, timeout=6)
    assert second and second[0].reconsume_times == 1
    await asyncio.sleep(2)  # not acked again: past retryMaxTimes=1, to the DLQ
    r = await p.pop(G, "PopD", invisible_ms=1000)
    assert r.code == RC.POLLING_TIMEOUT
    dlq = await c.call(R.GET_MAX_OFFSET, {"topic": f"%DLQ%{G}", "queueId": "0"})
    assert dlq.code == RC.SUCCESS and dlq.ext_fields["offset"] == "1"


@pytest.mark.timeout(150)
async def test_sigkill_between_pop_and_ack(cluster):
    c = cluster
    await c.create_topic("PopK", queues=2)
    p = PopClient(c.addr, "broker-a", c.client)
    await fill(c, "PopK", 6, queues=2)
    popped_at = time.monotonic()
    got = await pop_all(p, "PopK", 6, 3000)
    assert len(got) == 6
    acked = {m.body for m in got[:3]}
    for m in got[:3]:
        assert (await p.ack(G, "PopK", handle_of(m))).code == RC.SUCCESS
    killed_at = time.monotonic()
    c.broker.kill()
    c.start_broker()
    back = await pop_all(p, "PopK", 3, 3000, timeout=15)
    assert time.monotonic() - popped_at >= 2.9  # not before their invisible time
    assert sorted(m.body for m in back) == sorted(m.body for m in got[3:])
    assert not acked & {m.body for m in back}
    assert time.monotonic() - killed_at < 15
    for m in back:
        await p.ack(G, "PopK", handle_of(m))
    await asyncio.sleep(3.5)
    r = await p.pop(G, "PopK", invisible_ms=3000)
    assert r.code == RC.POLLING_TIMEOUT, [m.body for m in r.messages]


@pytest.mark.timeout(60)
async def test_topic_attributes_and_bad_pop_headers(cluster):
    c = cluster
    r = await c.call(R.UPDATE_AND_CREATE_TOPIC, {
        "topic": "PopF", "defaultTopic": "TBW102", "readQueueNums": "2", "writeQueueNums": "2",
        "perm": "6", "topicFilterType": "SINGLE_TAG", "attributes": "+message.type=FIFO"})
    assert r.code == RC.SUCCESS, r.remark
    r = await c.call(R.GET_ALL_TOPIC_CONFIG)
    assert orjson.loads(r.body)["topicConfigTable"]["PopF"]["attributes"] == {
        "message.type": "FIFO"}
    r = await c.call(R.UPDATE_AND_CREATE_TOPIC, {
        "topic": "PopF", "defaultTopic": "TBW102", "readQueueNums": "2", "writeQueueNums": "2",
        "perm": "6", "topicFilterType": "SINGLE_TAG", "attributes": "+message.type=NOPE"})
    assert r.code == RC.SYSTEM_ERROR and "not in set" in r.remark
    r = await c.call(R.POP_MESSAGE, {"consumerGroup": G, "topic": "PopF", "queueId": "-1"})
    assert r.code == RC.SYSTEM_ERROR and "maxMsgNums" in r.remark
    r = await c.call(R.ACK_MESSAGE, {"consumerGroup": G, "topic": "PopF", "queueId": "0",
                                     "offset": "0", "extraInfo": "bad"})
    assert r.code == RC.SYSTEM_ERROR


@pytest.mark.timeout(60)
async def test_inflight_metric_per_group(tmp_path):
    from rmq.testing.procs import free_port

    port = free_port()
    c = Cluster(tmp_path, f"metricsExporterType=PROM\nmetricsPromExporterHost=127.0.0.1\n"
                                   f"metricsPromExporterPort={port}\n")
    c.start_broker()
    try:
        await c.create_topic("PopM", queues=1)
        p = PopClient(c.addr, "broker-a", c.client)
        await fill(c, "PopM", 3, queues=1)
        got = await pop_all(p, "PopM", 3, 30000)
        await p.ack(G, "PopM", handle_of(got[0]))

        def inflight() -> float | None:
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
            for line in text.decode().splitlines():
                if line.startswith("rocketmq_consumer_inflight_messages{") and \
                        f'consumer_group="{G}"' in line and 'topic="PopM"' in line:
                    return float(line.rsplit(" ", 1)[1])
            return None

        async def two_inflight() -> bool:
            got = await asyncio.to_thread(inflight)
            assert got == 2.0, got
            return True
        await wait_until(two_inflight, 10, 0.2, "two messages in flight")
        from rmq.tools.dashboard.service import DashboardService

        svc = DashboardService(c.namesrv_addr)  # the web console's groups page
        try:
            rows = {r["group"]: r for r in await svc.groups()}
        finally:
            await svc.close()
        assert rows[G]["inflight"] == 2
    finally:
        await c.close()


@pytest.mark.timeout(90)
async def test_admin_5x_options(cluster):
    from tests.integration.admin_cli import admin_fails, admin_json

    c = cluster
    ns = c.namesrv_addr
    rows = await admin_json(ns, "updateTopic", "-b", c.addr, "-t", "PopA", "-a",
                            "+message.type=FIFO")
    assert rows[0]["attributes"] == "+message.type=FIFO"
    r = await c.call(R.GET_ALL_TOPIC_CONFIG)
    assert orjson.loads(r.body)["topicConfigTable"]["PopA"]["attributes"] == {
        "message.type": "FIFO"}
    err = await admin_fails(ns, "updateTopic", "-b", c.addr, "-t", "PopA", "-a", "+bad.key=1")
    assert "unsupported key: bad.key" in err
    await admin_json(ns, "updateSubGroup", "-b", c.addr, "-g", "popOrderly", "-o", "true")
    r = await c.call(R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
    table = orjson.loads(r.body)["subscriptionGroupTable"]
    assert table["popOrderly"]["consumeMessageOrderly"] is True
    rows = await admin_json(ns, "setConsumeMode", "-b", c.addr, "-t", "PopA", "-g", "popOrderly",
                            "-m", "POP")
    assert rows[0]["mode"] == "POP"
    saved = orjson.loads((c.tmp / "store-broker-a" / "config" /
                          "messageRequestMode.json").read_bytes())
    assert saved["messageRequestModeMap"]["PopA"]["popOrderly"] == {
        "consumerGroup": "popOrderly", "mode": "POP", "popShareQueueNum": 0, "topic": "PopA"}


def bitset_b64(offsets: list[int], start: int) -> str:
    """``BitSet.toByteArray`` of the offsets' distances from ``start``, base64."""
    import base64

    n = max(offsets) - start + 1
    raw = bytearray((n + 7) // 8)
    for o in offsets:
        raw[(o - start) // 8] |= 1 << ((o - start) % 8)
    return base64.b64encode(bytes(raw)).decode()


@pytest.mark.timeout(90)
async def test_batch_ack_tag_filter_and_push_consumer(cluster):
    c = cluster
    await c.create_topic("PopB", queues=1)
    p = PopClient(c.addr, "broker-a", c.client)
    await fill(c, "PopB", 6, queues=1)
    got = await pop_all(p, "PopB", 3, 1500, exp="T0")  # tags T0: m0, m2, m4
    assert sorted(m.body for m in got) == [b"m0", b"m2", b"m4"]
    f = got[0].properties["POP_CK"].split(" ")
    offsets = [int(m.properties["POP_CK"].split(" ")[7]) for m in got]
    body = orjson.dumps({"brokerName": "broker-a", "acks": [{
        "c": G, "t": "PopB", "r": "0", "so": int(f[0]), "q": 0, "rq": int(f[3]),
        "pt": int(f[1]), "it": int(f[2]), "b": bitset_b64(offsets, int(f[0]))}]})
    r = await c.call(R.BATCH_ACK_MESSAGE, None, body)
    assert r.code == RC.SUCCESS, r.remark
    await asyncio.sleep(2.2)
    r = await p.pop(G, "PopB", invisible_ms=1500, exp="T0")
    assert r.code == RC.POLLING_TIMEOUT, [m.body for m in r.messages]  # the batch ack stuck
    # a push consumer in POP mode: fails m1 once, then consumes everything left
    from rmq.client.pop import PopPushConsumer

    seen: list[tuple[bytes, int]] = []

    def listener(m) -> bool:
        seen.append((m.body, m.reconsume_times))
        return not (m.body == b"m1" and m.reconsume_times == 0)

    consumer = PopPushConsumer(p, "pushGroup", "PopB", listener, invisible_ms=1000, poll_ms=1000)
    consumer.start()
    try:
        await wait_until(lambda: consumer.consumed >= 6, 15, 0.1, "six consumed")
    finally:
        await consumer.shutdown()
    assert (b"m1", 1) in seen and sorted({b for b, _ in seen}) == [f"m{i}".encode()
                                                                   for i in range(6)]


@pytest.mark.timeout(90)
async def test_retry_topic_v2(tmp_path):
    c = Cluster(tmp_path, "enableRetryTopicV2=true\npopFromRetryProbability=100\n")
    c.start_broker()
    try:
        await c.create_topic("PopV", queues=1)
        p = PopClient(c.addr, "broker-a", c.client)
        await fill(c, "PopV", 1, queues=1)
        await pop_all(p, "PopV", 1, 1000)
        again = await p.pop(G, "PopV", invisible_ms=3000, poll_ms=4000)
        assert [m.body for m in again.messages] == [b"m0"]
        handle = handle_of(again.messages[0]).split(" ")
        assert handle[4] == "2"  # read from %RETRY%group+topic
        assert (await p.ack(G, "PopV", handle_of(again.messages[0]))).code == RC.SUCCESS
        r = await c.call(R.GET_MAX_OFFSET, {"topic": f"%RETRY%{G}+PopV", "queueId": "0"})
        assert r.code == RC.SUCCESS and r.ext_fields["offset"] == "1"
        await asyncio.sleep(3.3)
        assert (await p.pop(G, "PopV", invisible_ms=1000)).code == RC.POLLING_TIMEOUT
    finally:
        await c.close()


@pytest.mark.timeout(150)
async def test_sigkill_at_random_moments_during_pop_and_ack(cluster):
    """Pops and acks run while the broker is killed; after the restart every
    message is consumed, and none whose ack was answered comes back."""
    import random

    c = cluster
    await c.create_topic("PopS", queues=4)
    total = 200
    await fill(c, "PopS", total)
    p = PopClient(c.addr, "broker-a", c.client)
    acked: set[bytes] = set()
    seen: set[bytes] = set()
    for _ in range(2):
        async def consume() -> None:
            while True:
                try:
                    r = await p.pop(G, "PopS", max_nums=4, invisible_ms=2000)
                except RemotingError:
                    return
                for m in r.messages:
                    assert m.body not in acked, f"{m.body} acked, then delivered again"
                    seen.add(m.body)
                    if random.random() < 0.7:
                        try:
                            ok = (await p.ack(G, "PopS", handle_of(m))).code == RC.SUCCESS
                        except RemotingError:
                            return
                        if ok:
                            acked.add(m.body)
                await asyncio.sleep(0.01)

        task = asyncio.ensure_future(consume())
        await asyncio.sleep(random.uniform(0.1, 0.5))
        assert not task.done()
        c.broker.kill()
        await asyncio.wait_for(task, 10)
        c.start_broker()
    deadline = time.monotonic() + 40
    while len(acked) < total:
        assert time.monotonic() < deadline, f"lost: {total - len(acked)} never acked"
        try:
            r = await p.pop(G, "PopS", max_nums=32, invisible_ms=2000, poll_ms=1000)
        except RemotingError:
            await asyncio.sleep(0.1)
            continue
        for m in r.messages:
            assert m.body not in acked, f"{m.body} acked, then delivered again"
            if (await p.ack(G, "PopS", handle_of(m))).code == RC.SUCCESS:
                acked.add(m.body)
    assert acked == {f"m{i}".encode() for i in range(total)}


@pytest.mark.timeout(60)
async def test_notification_peek_and_sql92(tmp_path):
    c = Cluster(tmp_path, "enablePropertyFilter=true\n")
    c.start_broker()
    try:
        await c.create_topic("PopN", queues=2)
        p = PopClient(c.addr, "broker-a", c.client)
        r = await c.call(R.PEEK_MESSAGE, {"consumerGroup": G, "topic": "PopN", "queueId": "-1",
                                          "maxMsgNums": "4"})
        assert r.code == RC.PULL_NOT_FOUND
        held = asyncio.ensure_future(c.call(R.NOTIFICATION, {
            "consumerGroup": G, "topic": "PopN", "queueId": "-1", "pollTime": "5000",
            "bornTime": str(int(time.time() * 1000))}, timeout_ms=8000))
        await asyncio.sleep(0.3)
        assert not held.done(), held.result()
        t0 = time.monotonic()
        await send(c, "PopN", b"a", 0, props(TAGS="x", color="red"))
        await send(c, "PopN", b"b", 1, props(TAGS="x", color="blue"))
        n = await held
        assert n.code == RC.SUCCESS and n.ext_fields["hasMsg"] == "true"
        assert time.monotonic() - t0 < 1.5
        # peek shows them without taking them
        r = await c.call(R.PEEK_MESSAGE, {"consumerGroup": G, "topic": "PopN", "queueId": "-1",
                                          "maxMsgNums": "4"})
        assert r.code == RC.SUCCESS and int(r.ext_fields["restNum"]) >= 0
        got = await pop_all(p, "PopN", 1, 2000, exp="color = 'blue'", exp_type="SQL92")
        assert [m.body for m in got] == [b"b"]
        r = await p.pop(G, "PopN", invisible_ms=2000, exp="color = 'blue'", exp_type="SQL92")
        assert r.code == RC.POLLING_TIMEOUT  # red filtered out, offsets moved past it
        n = await c.call(R.NOTIFICATION, {"consumerGroup": G, "topic": "PopN", "queueId": "-1",
                                          "pollTime": "0", "bornTime": "0"})
        assert n.code == RC.SUCCESS and n.ext_fields["hasMsg"] == "false"
    finally:
        await c.close()


@pytest.mark.timeout(60)
async def test_orderly_change_invisible_and_ack(cluster):
    c = cluster
    await c.create_topic("PopOC", queues=1)
    await create_group(c, G, orderly=True)
    p = PopClient(c.addr, "broker-a", c.client)
    await fill(c, "PopOC", 2, queues=1)
    r = await p.pop(G, "PopOC", max_nums=1, invisible_ms=800)
    (m,) = r.messages
    resp, new = await p.change_invisible(G, "PopOC", handle_of(m), 3000)
    assert resp.code == RC.SUCCESS and resp.ext_fields["reviveQid"] == "999"
    await asyncio.sleep(1.2)  # past the first invisible time: still blocked
    assert (await p.pop(G, "PopOC", invisible_ms=800)).code == RC.POLLING_TIMEOUT
    assert (await p.ack(G, "PopOC", new)).code == RC.SUCCESS
    r = await p.pop(G, "PopOC", invisible_ms=800)
    assert [x.body for x in r.messages] == [b"m1"]


@pytest.mark.timeout(60)
async def test_ack_just_before_the_invisible_time_ends_sticks(cluster):
    c = cluster
    await c.create_topic("PopE", queues=1)
    p = PopClient(c.addr, "broker-a", c.client)
    await fill(c, "PopE", 5, queues=1)
    got = []
    for _ in range(5):  # five checkpoints, each acked 300 ms before its revive time
        r = await p.pop(G, "PopE", max_nums=1, invisible_ms=2000)
        got.append((r.pop_time, r.messages[0]))
    for pop_time, m in got:
        await asyncio.sleep(max(0.0, (pop_time + 1700) / 1000 - time.time()))
        assert (await p.ack(G, "PopE", handle_of(m))).code == RC.SUCCESS
    r = await p.pop(G, "PopE", invisible_ms=1000, poll_ms=1500)
    assert r.code == RC.POLLING_TIMEOUT, [m.body for m in r.messages]


@pytest.mark.timeout(90)
async def test_graceful_restart_keeps_checkpoints(cluster):
    c = cluster
    await c.create_topic("PopG", queues=1)
    p = PopClient(c.addr, "broker-a", c.client)
    await fill(c, "PopG", 4, queues=1)
    got = await pop_all(p, "PopG", 4, 4000)
    popped_at = time.monotonic()
    for m in got[:2]:
        assert (await p.ack(G, "PopG", handle_of(m))).code == RC.SUCCESS
    assert c.broker.stop() == 0
    c.start_broker()
    back = await pop_all(p, "PopG", 2, 4000, timeout=15)
    assert time.monotonic() - popped_at >= 3.9
    assert sorted(m.body for m in back) == sorted(m.body for m in got[2:])


@pytest.mark.timeout(60)
async def test_query_assignment_follows_the_consume_mode(cluster):
    c = cluster
    from rmq.remoting import RemotingClient, RemotingCommand

    await c.create_topic("PopQ", queues=4)
    other = RemotingClient()  # a second connection: a second client of the group
    for cid, client in (("127.0.0.1@A", c.client), ("127.0.0.1@B", other)):
        hb = {"clientID": cid, "producerDataSet": [], "consumerDataSet": [{
            "groupName": G, "consumeType": 1, "messageModel": "CLUSTERING",
            "consumeFromWhere": 0, "subscriptionDataSet": [
                {"topic": "PopQ", "subString": "*", "subVersion": "1"}]}]}
        r = await client.invoke(c.addr, RemotingCommand.create_request(
            R.HEART_BEAT, None, orjson.dumps(hb)), 5000)
        assert r.code == RC.SUCCESS

    async def assignment() -> list[tuple[int, str]]:
        r = await c.call(R.QUERY_ASSIGNMENT, None, orjson.dumps({
            "topic": "PopQ", "consumerGroup": G, "clientId": "127.0.0.1@A",
            "strategyName": "AVG", "messageModel": "CLUSTERING"}))
        assert r.code == RC.SUCCESS, r.remark
        return sorted((a["messageQueue"]["queueId"], a["mode"])
                      for a in orjson.loads(r.body)["messageQueueAssignments"])

    assert await assignment() == [(0, "PULL"), (1, "PULL")]  # half of the 4 queues
    r = await c.call(R.SET_MESSAGE_REQUEST_MODE, None, orjson.dumps({
        "topic": "PopQ", "consumerGroup": G, "mode": "POP", "popShareQueueNum": 0}))
    assert r.code == RC.SUCCESS
    assert await assignment() == [(-1, "POP")]  # pop from every queue
    r = await c.call(R.SET_MESSAGE_REQUEST_MODE, None, orjson.dumps({
        "topic": "%RETRY%x", "consumerGroup": G, "mode": "POP"}))
    assert r.code == RC.NO_PERMISSION
    await other.close()


@pytest.mark.timeout(90)
async def test_offsets_past_a_replaced_store_are_corrected(cluster):
    """consumerOffset.json kept while the commit log and consume queues are
    gone: pops and the revive service go on from the store's end."""
    import shutil

    c = cluster
    await c.create_topic("PopW", queues=1)
    p = PopClient(c.addr, "broker-a", c.client)
    await fill(c, "PopW", 3, queues=1)
    for m in await pop_all(p, "PopW", 3, 2000):
        await p.ack(G, "PopW", handle_of(m))
    assert c.broker.stop() == 0
    store = c.tmp / "store-broker-a"
    for d in ("commitlog", "consumequeue", "index"):
        shutil.rmtree(store / d, ignore_errors=True)
    (store / "checkpoint").unlink(missing_ok=True)
    c.start_broker()
    await c.wait_routable("PopW")
    await fill(c, "PopW", 2, queues=1)
    got = await pop_all(p, "PopW", 2, 1000, timeout=10)
    assert sorted(m.body for m in got) == [b"m0", b"m1"]
    back = await pop_all(p, "PopW", 2, 1000, timeout=10)  # not acked: revived
    assert sorted(m.body for m in back) == [b"m0", b"m1"]


@pytest.mark.timeout(60)
async def test_first_pop_with_init_mode_max_saves_its_start(cluster):
    """A group's first pop with ConsumeInitMode MAX (the 5.x proxy path) saves where
    it starts, so what is sent after it is popped next; while the queue's first
    message is still in memory the start is 0 (5.3.3's rule)."""
    c = cluster
    await c.create_topic("PopInit", queues=1)
    p = PopClient(c.addr, "broker-a", c.client)
    r = await p.pop(G, "PopInit", queue_id=0, invisible_ms=5000, init_mode=1)
    assert r.code == RC.POLLING_TIMEOUT
    await fill(c, "PopInit", 3, queues=1)
    got = await pop_all(p, "PopInit", 3, 5000, init_mode=1)
    assert sorted(m.body for m in got) == [b"m0", b"m1", b"m2"]
    # a new group on a queue that already holds messages still in memory: from 0
    r = await p.pop("popGroup2", "PopInit", queue_id=0, invisible_ms=5000, max_nums=32,
                    init_mode=1)
    assert sorted(m.body for m in r.messages) == [b"m0", b"m1", b"m2"]


@pytest.mark.timeout(60)
async def test_first_pop_with_init_mode_max_without_the_memory_check(tmp_path):
    c = Cluster(tmp_path, "initPopOffsetByCheckMsgInMem=false\n")
    c.start_broker()
    try:
        await c.create_topic("PopInit", queues=1)
        await fill(c, "PopInit", 3, queues=1)
        p = PopClient(c.addr, "broker-a", c.client)
        r = await p.pop(G, "PopInit", queue_id=0, invisible_ms=5000, init_mode=1)
        assert [m.body for m in r.messages] == [b"m2"]  # the last message only
        await fill(c, "PopInit", 2, queues=1)  # m0, m1 again, after the saved start
        got = await pop_all(p, "PopInit", 2, 5000, init_mode=1)
        assert sorted(m.body for m in got) == [b"m0", b"m1"]
        r = await c.call(R.QUERY_CONSUMER_OFFSET, {"consumerGroup": G, "topic": "PopInit",
                                                    "queueId": "0"})
        assert r.code == RC.SUCCESS and int(r.ext_fields["offset"]) >= 2
    finally:
        await c.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["kill", "stop"])
async def test_orderly_state_survives_a_restart(cluster, how):
    """consumerOrderInfo.json keeps a queue blocked while its batch is unacked
    and its acks (the offset file is written once a minute here) across a
    SIGKILL or a graceful restart."""
    c = cluster
    await c.create_topic("PopOR", queues=1)
    await create_group(c, G, orderly=True)
    p = PopClient(c.addr, "broker-a", c.client)
    await fill(c, "PopOR", 4, queues=1)
    r = await p.pop(G, "PopOR", max_nums=2, invisible_ms=60000)
    assert [m.body for m in r.messages] == [b"m0", b"m1"]
    (m0, m1) = r.messages
    assert (await p.ack(G, "PopOR", handle_of(m0))).code == RC.SUCCESS
    if how == "kill":
        c.broker.kill()
    else:
        assert c.broker.stop() == 0
    text = (c.tmp / "store-broker-a" / "config" / "consumerOrderInfo.json").read_text()
    saved = orjson.loads(text.replace("{0:", '{"0":'))["table"][f"PopOR@{G}"]["0"]
    assert saved["o"] == [0, 1] and saved["cm"] == 1 and saved["i"] == 60000
    assert saved["popTime"] == r.pop_time
    c.start_broker()
    await c.wait_routable("PopOR")
    assert (await p.pop(G, "PopOR", invisible_ms=3000)).code == RC.POLLING_TIMEOUT  # blocked
    assert (await p.ack(G, "PopOR", handle_of(m1))).code == RC.SUCCESS  # the old handle
    r = await p.pop(G, "PopOR", max_nums=32, invisible_ms=3000)
    assert [m.body for m in r.messages] == [b"m2", b"m3"]  # m0, m1 not again
    for m in r.messages:
        assert (await p.ack(G, "PopOR", handle_of(m))).code == RC.SUCCESS
    c.broker.kill()  # the acks of the second batch are on disk too
    c.start_broker()
    await c.wait_routable("PopOR")
    assert (await p.pop(G, "PopOR", invisible_ms=3000, poll_ms=500)).code == RC.POLLING_TIMEOUT
