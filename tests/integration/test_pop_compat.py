"""POP answers as a running RocketMQ 5.3.3 broker gives them.

Where a group's first pop starts, as 5.3.3's PopMessageProcessor.getInitOffset
decides it: initMode MIN (0) at the queue's minimum; MAX (1, what the 5.x Java push
consumer sends for its default CONSUME_FROM_LAST_OFFSET) at offset 0 while the queue
still starts at 0 and that message is in memory (initPopOffsetByCheckMsgInMem), else
at the last message; a retry topic always at its minimum, so what was revived
before the group's first pop of it comes back whatever the mode. A queueId past the
topic's read queues and a maxMsgNums above 32 answer 29 INVALID_PARAMETER;
NOTIFICATION answers pollingFull beside hasMsg."""

from __future__ import annotations

import pytest

from rmq.client.pop import PopClient, handle_of
from rmq.common.codes import RequestCode, ResponseCode
from tests.integration.test_pop import fill, pop_all

RC = ResponseCode
MIN, MAX = 0, 1


async def first_pop(p: PopClient, group: str, topic: str, init_mode: int) -> list[bytes]:
    r = await p.pop(group, topic, invisible_ms=60000, init_mode=init_mode)
    assert r.code in (RC.SUCCESS, RC.POLLING_TIMEOUT), r.remark
    return sorted(m.body for m in r.messages)


@pytest.mark.timeout(90)
async def test_first_pop_of_a_group_by_init_mode(cluster):
    c = cluster
    await c.create_topic("PopInit", queues=1)
    await fill(c, "PopInit", 3, queues=1)
    p = PopClient(c.addr, "broker-a", c.client)
    want = [b"m0", b"m1", b"m2"]
    assert await first_pop(p, "gMin", "PopInit", MIN) == want
    # the queue starts at 0 and its first message is in memory: from 0, as MIN
    assert await first_pop(p, "gMax", "PopInit", MAX) == want
    # the start is kept as the group's offset: a later pop goes on from there
    await fill(c, "PopInit", 1, queues=1)
    assert await first_pop(p, "gMax", "PopInit", MAX) == [b"m0"]


@pytest.mark.timeout(90)
async def test_revived_messages_come_back_to_a_max_mode_group(cluster):
    c = cluster
    await c.create_topic("PopInitR", queues=1)
    await fill(c, "PopInitR", 2, queues=1)
    p = PopClient(c.addr, "broker-a", c.client)
    r = await p.pop("popGroup", "PopInitR", invisible_ms=1000, init_mode=MIN)
    assert sorted(m.body for m in r.messages) == [b"m0", b"m1"]
    # not acked: revived into the retry topic before the group ever popped it
    again = await pop_all(p, "PopInitR", 2, 60000, timeout=15, init_mode=MAX)
    assert sorted(m.body for m in again) == [b"m0", b"m1"]
    assert all(m.reconsume_times == 1 for m in again)
    for m in again:
        assert (await p.ack("popGroup", "PopInitR", handle_of(m))).code == RC.SUCCESS


@pytest.mark.timeout(60)
async def test_refusals_and_notification_headers(cluster):
    c = cluster
    await c.create_topic("PopAns", queues=2)
    base = {"consumerGroup": "gAns", "topic": "PopAns", "maxMsgNums": "4",
            "invisibleTime": "5000", "pollTime": "0", "bornTime": "0", "initMode": "0"}
    for code in (RequestCode.POP_MESSAGE, RequestCode.PEEK_MESSAGE, RequestCode.NOTIFICATION,
                 RequestCode.POLLING_INFO):
        r = await c.call(code, {**base, "queueId": "2"})
        assert r.code == RC.INVALID_PARAMETER == 29, (code, r.code, r.remark)
        assert r.remark.startswith("queueId[2] is illegal, topic:[PopAns] "
                                   "topicConfig.readQueueNums:[2] consumer:[/127.0.0.1:"), r.remark
    r = await c.call(RequestCode.POP_MESSAGE, {**base, "queueId": "-1", "maxMsgNums": "33"})
    assert r.code == RC.INVALID_PARAMETER and "greater than 32" in r.remark
    r = await c.call(RequestCode.NOTIFICATION, {**base, "queueId": "-1"})
    assert r.code == RC.SUCCESS
    assert (r.ext_fields["hasMsg"], r.ext_fields["pollingFull"]) == ("false", "false")
