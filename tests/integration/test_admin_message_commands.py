"""rmq-admin's mqadmin message commands (queryMsgById with its resend and
consume-directly modes, printMsgByQueue, queryCq) as subprocesses against a
real rmq-namesrv + rmq-broker with a live rmq push consumer."""

from __future__ import annotations

import re
import time

import pytest
import pytest_asyncio

from rmq.client import Message, Producer, PushConsumer
from rmq.testing.cluster import Cluster
from rmq.testing.messaging import running_cluster
from rmq.testing.wait import wait_until
from tests.integration.admin_cli import admin_fails, admin_json, admin_ok, recording_consumer

# once: the rmq-admin command line, no compiled/twin pair of its own
pytestmark = [pytest.mark.once, pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]
TOPIC, GROUP = "TopicAdmMsg", "cgAdmMsg"


class Live:
    def __init__(self, c: Cluster, sent: list, consumer: PushConsumer,
                 received: list) -> None:
        self.c, self.sent, self.consumer, self.received = c, sent, consumer, received

    @property
    def ns(self) -> str:
        return self.c.namesrv_addr


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def live(tmp_path_factory):
    async with running_cluster(tmp_path_factory.mktemp("admin-message")) as c:
        await c.create_topic(TOPIC, queues=2)
        sent = []
        async with Producer("pgAdmMsg", client_config=c.client_config("msg-p")) as p:
            for i in range(6):
                sent.append(await p.send(
                    Message(TOPIC, f"body{i}".encode(), tags="TagA" if i % 3 else "TagB",
                            keys=f"k{i}")))
                time.sleep(0.01)  # distinct store times
        async with recording_consumer(c, GROUP, TOPIC, "*", 6) as (consumer, got):
            yield Live(c, sent, consumer, got)


async def test_query_msg_by_id_modes(live):
    k = live
    first, second = k.sent[0], k.sent[1]
    out = await admin_ok(k.ns, "queryMsgById", "-i", first.offset_msg_id)
    assert f"msgId:            {first.msg_id}" in out and "body:             body0" in out
    both = await admin_json(k.ns, "queryMsgById", "-i",
                            f"{first.offset_msg_id}, {second.offset_msg_id}")
    assert [m["body"] for m in both] == ["body0", "body1"]
    # -g -d: the live consumer's listener gets the message again
    before = len(k.received)
    cid = k.consumer.instance.client_id
    out = await admin_ok(k.ns, "queryMsgById", "-i", first.offset_msg_id, "-g", GROUP, "-d", cid)
    assert re.fullmatch(r"ConsumeMessageDirectlyResult \[order=false, autoCommit=true, "
                        r"consumeResult=CR_SUCCESS, remark=null, spentTimeMills=\d+\]\n", out), out
    await wait_until(lambda: len(k.received) > before, 10)
    assert k.received[before].body == b"body0"
    err = await admin_fails(k.ns, "queryMsgById", "-i", first.offset_msg_id, "-g", GROUP,
                            "-d", "nobody")
    assert "not online" in err
    # -s true: sent again, same topic, body, key and client message id
    before = len(k.received)
    out = await admin_ok(k.ns, "queryMsgById", "-i", second.offset_msg_id, "-s", "true")
    prepare, result = out.splitlines()
    assert prepare == f"prepare resend msg. originalMsgId={second.offset_msg_id}"
    assert re.fullmatch(rf"SendResult \[sendStatus=SEND_OK, msgId={second.msg_id}, offsetMsgId="
                        r"[0-9A-F]{32}, messageQueue=MessageQueue \[topic=TopicAdmMsg, "
                        r"brokerName=broker-a, queueId=\d\], queueOffset=\d+\]", result), result
    await wait_until(lambda: any(m.body == b"body1" for m in k.received[before:]), 10)
    again = next(m for m in k.received[before:] if m.body == b"body1")
    assert again.keys == "k1" and again.tags == "TagA" and again.msg_id == second.msg_id
    assert await admin_ok(k.ns, "queryMsgById", "-i", second.offset_msg_id, "-s", "false") == "\n"
    assert "no message id given" in await admin_fails(k.ns, "queryMsgById", "-i", " , ")
    assert "XYZ" in await admin_fails(k.ns, "queryMsgById", "-i", "XYZ")


async def test_print_msg_by_queue(live):
    k = live
    q0 = [s for s in k.sent if s.message_queue.queue_id == 0]
    out = await admin_ok(k.ns, "printMsgByQueue", "-t", TOPIC, "-a", "broker-a", "-i", "0",
                         "-p", "true", "-d", "true")
    lines = [x for x in out.splitlines() if x.startswith("MSGID: ")]
    assert [x.split()[1] for x in lines[:len(q0)]] == [s.msg_id for s in q0]
    m = re.fullmatch(r"MSGID: (\w+) MessageExt \[brokerName=broker-a, queueId=0, storeSize=\d+, "
                     r"queueOffset=0, sysFlag=0, bornTimestamp=\d+, bornHost=/127\.0\.0\.1:\d+, "
                     r"storeTimestamp=\d+, storeHost=/127\.0\.0\.1:\d+, msgId=(\w+), "
                     r"commitLogOffset=\d+, bodyCRC=-?\d+, reconsumeTimes=0, "
                     r"preparedTransactionOffset=0, toString\(\)=Message\{topic='TopicAdmMsg', "
                     r"flag=0, properties=\{.*\}, body=\[([-\d, ]+)\], transactionId='null'\}\] "
                     r"BODY: (\w+)", lines[0])
    assert m, lines[0]
    assert m.group(2) == q0[0].offset_msg_id
    assert bytes(int(b) for b in m.group(3).split(", ")).decode() == m.group(4)
    out = await admin_ok(k.ns, "printMsgByQueue", "-t", TOPIC, "-a", "broker-a", "-i", "0",
                         "-p", "true")
    assert out.splitlines()[0].endswith("BODY: NOT PRINT BODY")
    out = await admin_ok(k.ns, "printMsgByQueue", "-t", TOPIC, "-a", "broker-a", "-i", "1",
                         "-f", "true", "-s", "TagA")
    tags = [x.split() for x in out.splitlines()]
    assert all(t[0] == "Tag:" and t[1] == "TagA" and t[2] == "Count:" for t in tags)
    every = (await admin_json(k.ns, "printMsgByQueue", "-t", TOPIC, "-a", "broker-a", "-i",
                              "0", "-p", "true"))["messages"]
    assert [m["queueOffset"] for m in every] == list(range(len(every))) and len(every) >= 3
    # up to the offset of the message stored at that time (stores are 10 ms apart)
    data = await admin_json(k.ns, "printMsgByQueue", "-t", TOPIC, "-a", "broker-a", "-i", "0",
                            "-f", "true", "-p", "true", "-e", str(every[2]["storeTimestamp"]))
    assert [m["msgId"] for m in data["messages"]] == [m["msgId"] for m in every[:2]]
    assert sum(data["tags"].values()) == 2
    data = await admin_json(k.ns, "printMsgByQueue", "-t", TOPIC, "-a", "broker-a", "-i", "0",
                            "-p", "true", "-b", str(every[1]["storeTimestamp"]))
    assert [m["msgId"] for m in data["messages"]] == [m["msgId"] for m in every[1:]]
    assert "unknown charset" in await admin_fails(k.ns, "printMsgByQueue", "-t", TOPIC, "-a",
                                                  "broker-a", "-i", "0", "-c", "NOPE-9")
    assert "CODE: 17" in await admin_fails(k.ns, "printMsgByQueue", "-t", "NoSuchTopic", "-a",
                                           "broker-a", "-i", "0")


async def test_query_cq(live):
    k = live
    status = await admin_json(k.ns, "topicStatus", "-t", TOPIC)
    size = next(r["maxOffset"] for r in status if r["queueId"] == 0)
    out = await admin_ok(k.ns, "queryCq", "-t", TOPIC, "-q", "0", "-i", "0", "-c", "2")
    lines = out.splitlines()
    assert lines[:3] == ["Queue data: ", f"max: {size}, min: 0", "=" * 38]
    assert lines[3] == "idx: 0"
    assert re.fullmatch(
        r"ConsumeQueueData\{physicOffset=\d+, physicSize=\d+, tagsCode=-?\d+, "
        r"extendDataJson='null', bitMap='null', eval=false, msg='null'\}", lines[4]), lines[4]
    assert lines[6] == "idx: 1" and len(lines) == 9
    data = await admin_json(k.ns, "queryCq", "-t", TOPIC, "-q", "0", "-i", "1", "-c", "5",
                            "-b", k.c.addr, "-g", GROUP)
    assert len(data["queueData"]) == size - 1
    assert data["subscriptionData"]["topic"] == TOPIC
    out = await admin_ok(k.ns, "queryCq", "-t", TOPIC, "-q", "0", "-i", "0", "-c", "1",
                         "-g", GROUP)
    assert out.startswith('Subscription data: \n{\n\t"classFilterMode":false,')
    assert "is not exist" in await admin_fails(k.ns, "queryCq", "-t", TOPIC, "-q", "0",
                                               "-i", "99")
    assert "7@TopicAdmMsg is not exist!" in await admin_fails(k.ns, "queryCq", "-t", TOPIC,
                                                              "-q", "7", "-i", "0")
