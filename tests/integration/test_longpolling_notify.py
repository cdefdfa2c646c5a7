"""Arrival notices under a produce load: single sends on the fast path while
no pull is held skip long polling, yet a pull held afterwards still wakes on
the first new message of its queue (and only for messages its filter
accepts), and the put statistics count every message."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest

from rmq.client.codec import decode_messages
from rmq.common.codes import RequestCode, ResponseCode
from rmq.testing.cluster import Cluster
from tests.integration.test_messaging_raw import props, pull, send

R = RequestCode
RC = ResponseCode
TOPIC = "NotifyTopic"


async def held_pull(c: Cluster, queue_id: int, offset: int, sub: str = "*"):
    task = asyncio.ensure_future(pull(c, TOPIC, queue_id, offset, sys_flag=6, sub=sub,
                                      suspend_ms=8000, timeout_ms=15000))
    await asyncio.sleep(0.3)  # suspended by now
    assert not task.done()
    return task


async def wake(c: Cluster, task, queue_id: int, body: bytes, tags: str) -> float:
    sent_at = time.monotonic()
    r = await send(c, TOPIC, body, queue_id, props(TAGS=tags))
    assert r.code == RC.SUCCESS
    p = await asyncio.wait_for(task, 5)
    latency = time.monotonic() - sent_at
    assert p.code == RC.SUCCESS and [m.body for m in decode_messages(p.body)] == [body]
    assert latency < 1.0, latency  # the notice, not the 5 s re-check
    return latency


@pytest.mark.timeout(90)
async def test_held_pull_wakes_on_first_message_after_a_produce_load(cluster):
    c = cluster
    r = await send(c, TOPIC, b"create", 0, props(TAGS="A"))  # auto-created: general path
    assert r.code == RC.SUCCESS
    # a produce load with nobody holding a pull (the fast path)
    results = await asyncio.gather(*(send(c, TOPIC, b"x" * 100, i % 4, props(TAGS="A"))
                                     for i in range(400)))
    assert all(r.code == RC.SUCCESS for r in results)
    # held on an empty queue from offset 1 (0 is taken below), then on a busy one
    q3_end = int(results[-1].ext_fields["queueOffset"]) + 1
    first = await held_pull(c, 3, q3_end)
    await wake(c, first, 3, b"first", "A")
    # a held pull with a tag filter ignores other tags, wakes on its own
    filtered = await held_pull(c, 3, q3_end + 1, sub="B")
    r = await send(c, TOPIC, b"other", 3, props(TAGS="A"))
    assert r.code == RC.SUCCESS
    await asyncio.sleep(0.3)
    assert not filtered.done()
    await wake(c, filtered, 3, b"mine", "B")
    # two queues held at once, only the one written to answers
    q1_end = (await pull(c, TOPIC, 1, 0, max_nums=1)).ext_fields["maxOffset"]
    q2_end = (await pull(c, TOPIC, 2, 0, max_nums=1)).ext_fields["maxOffset"]
    held1 = await held_pull(c, 1, int(q1_end))
    held2 = await held_pull(c, 2, int(q2_end))
    await wake(c, held2, 2, b"two", "A")
    assert not held1.done()
    await wake(c, held1, 1, b"one", "A")

    # every message counted: 1 + 400 + 5 sends
    stats = orjson.loads((await c.call(R.VIEW_BROKER_STATS_DATA,
                                       {"statsName": "TOPIC_PUT_NUMS", "statsKey": TOPIC})).body)
    assert stats["statsMinute"]["sum"] == 406
    info = orjson.loads((await c.call(R.GET_BROKER_RUNTIME_INFO)).body)["table"]
    assert info["msgPutTotalTodayNow"] == "406"
    assert info["putMessageTimesTotal"] == "406"
