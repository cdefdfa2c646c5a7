"""Message trace through real rmq-namesrv and rmq-broker processes: a traced
producer, a traced push consumer and a traced transactional producer write
4.9.8's trace records to RMQ_SYS_TRACE_TOPIC (or a custom topic), and
``rmq-admin queryMsgTraceById`` reads them back through the broker's index."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest
import pytest_asyncio

from rmq.client import (
    ConsumeFromWhere,
    ConsumerConfig,
    ConsumeStatus,
    LocalTransactionState,
    Message,
    MQAdmin,
    Producer,
    ProducerConfig,
    PushConsumer,
    TransactionProducer,
)
from rmq.client.trace import decode, trace_views
from rmq.common.topics import TRACE_TOPIC
from rmq.testing.messaging import running_cluster
from rmq.testing.procs import run_cli
from rmq.testing.wait import wait_until

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]
TOPIC, CUSTOM = "TracedTopic", "MyTraceTopic"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory):
    async with running_cluster(tmp_path_factory.mktemp("trace"), "traceTopicEnable=true\n") as c:
        await c.create_topic(TOPIC, queues=2)
        await c.create_topic(CUSTOM, queues=1)
        yield c


async def _traces(admin: MQAdmin, topic: str, msg_id: str, want: set[str], timeout: float = 20) -> list[dict]:
    """The trace views of ``msg_id`` once every record type in ``want`` is there."""
    deadline = time.monotonic() + timeout
    while True:
        msgs = await admin.query_message(topic, msg_id, 64, 0, int(time.time() * 1000) + 1000)
        views = [v for m in msgs for v in trace_views(msg_id, m)]
        if want <= {v["msgType"] for v in views}:
            break
        assert time.monotonic() < deadline, f"trace records {want} of {msg_id}: only {views}"
        await asyncio.sleep(0.3)
    return views


async def test_producer_and_consumer_records_read_back(cluster):
    got: list = []

    def listener(msgs, ctx):
        got.extend(msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("cg_traced", listener=listener, client_config=cluster.client_config("tc"),
                            config=ConsumerConfig(enable_msg_trace=True,
                                                  consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET))
    consumer.subscribe(TOPIC, "*")
    await consumer.start()
    producer = Producer("pg_traced", config=ProducerConfig(enable_msg_trace=True),
                        client_config=cluster.client_config("tp"))
    await producer.start()
    admin = MQAdmin(cluster.namesrv_addr)
    try:
        sent = [await producer.send(Message(TOPIC, b"traced %d" % i, tags="TagA", keys=[f"order-{i}", "x"]))
                for i in range(5)]
        await wait_until(lambda: len(got) >= 5, 20, what="consumed")
        await producer.tracer.flush()
        await consumer.tracer.flush()
        views = await _traces(admin, TRACE_TOPIC, sent[0].msg_id, {"Pub", "SubBefore", "SubAfter"})
        pub = next(v for v in views if v["msgType"] == "Pub")
        assert (pub["groupName"], pub["topic"], pub["tags"], pub["keys"]) == ("pg_traced", TOPIC, "TagA",
                                                                              "order-0 x")
        assert pub["offSetMsgId"] == sent[0].offset_msg_id and pub["status"] == "success"
        assert pub["storeHost"] == cluster.addr
        sub = next(v for v in views if v["msgType"] == "SubAfter")
        assert sub["groupName"] == "cg_traced" and sub["status"] == "success"
        # the trace messages are found by the traced message's keys too
        by_key = await admin.query_message(TRACE_TOPIC, "order-3", 64, 0, int(time.time() * 1000) + 1000)
        assert any(c.beans[0].keys == "order-3 x" for m in by_key for c in decode(m.body.decode()))
        # and rmq-admin prints them as mqadmin does
        out = await asyncio.to_thread(run_cli, "rmq.tools.admin",
                                      ["queryMsgTraceById", "-n", cluster.namesrv_addr, "-i", sent[1].msg_id])
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[0].split() == ["#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes", "#Status"]
        assert lines[1].split()[:2] == ["Pub", "pg_traced"] and lines[1].split()[-1] == "success"
        assert any(line.split()[:2] == ["Sub", "cg_traced"] for line in lines)
        js = await asyncio.to_thread(run_cli, "rmq.tools.admin", ["queryMsgTraceById", "-n", cluster.namesrv_addr,
                                                                  "-i", sent[1].msg_id, "--json"])
        assert {v["msgType"] for v in orjson.loads(js.stdout)} >= {"Pub", "SubBefore", "SubAfter"}
    finally:
        await admin.close()
        await producer.shutdown()
        await consumer.shutdown()


async def test_failed_consumption_and_a_custom_trace_topic(cluster):
    refused: list = []

    def refuse(msgs, ctx):
        refused.extend(m.msg_id for m in msgs)
        return ConsumeStatus.RECONSUME_LATER

    consumer = PushConsumer("cg_refuses", listener=refuse, client_config=cluster.client_config("tc2"),
                            config=ConsumerConfig(enable_msg_trace=True, customized_trace_topic=CUSTOM,
                                                  consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET))
    consumer.subscribe(TOPIC, "*")
    await consumer.start()
    producer = Producer("pg_custom", client_config=cluster.client_config("tp2"),
                        config=ProducerConfig(enable_msg_trace=True, customized_trace_topic=CUSTOM))
    await producer.start()
    admin = MQAdmin(cluster.namesrv_addr)
    try:
        await wait_until(lambda: {mq.topic for mq in consumer.owned_queues()} >= {TOPIC}, 20, what="rebalanced")
        sent = await producer.send(Message(TOPIC, b"refused"))
        await wait_until(lambda: sent.msg_id in refused, 20, what="refused once")
        await producer.tracer.flush()
        await consumer.tracer.flush()
        views = await _traces(admin, CUSTOM, sent.msg_id, {"Pub", "SubAfter"})
        sub = next(v for v in views if v["msgType"] == "SubAfter")
        assert sub["status"] == "failed"
        raw = await admin.query_message(CUSTOM, sent.msg_id, 64, 0, int(time.time() * 1000) + 1000)
        codes = {c.context_code for m in raw for c in decode(m.body.decode()) if c.trace_type.value == "SubAfter"}
        assert 4 in codes  # ConsumeReturnType.FAILED
        assert not await admin.query_message(TRACE_TOPIC, sent.msg_id, 64, 0, int(time.time() * 1000) + 1000)
    finally:
        await admin.close()
        await producer.shutdown()
        await consumer.shutdown()


class Rollback:
    def execute_local_transaction(self, msg, arg):
        return LocalTransactionState.ROLLBACK_MESSAGE

    def check_local_transaction(self, msg):
        return LocalTransactionState.ROLLBACK_MESSAGE


async def test_end_transaction_record(cluster):
    producer = TransactionProducer("pg_tx_traced", listener=Rollback(), client_config=cluster.client_config("tx"),
                                   config=ProducerConfig(enable_msg_trace=True))
    await producer.start()
    admin = MQAdmin(cluster.namesrv_addr)
    try:
        sent = await producer.send_message_in_transaction(Message(TOPIC, b"tx", keys="tx-key"))
        await producer.tracer.flush()
        views = await _traces(admin, TRACE_TOPIC, sent.msg_id, {"Pub"})
        assert next(v for v in views if v["msgType"] == "Pub")["groupName"] == "pg_tx_traced"
        raw = await admin.query_message(TRACE_TOPIC, "tx-key", 64, 0, int(time.time() * 1000) + 1000)
        ends = [c for m in raw for c in decode(m.body.decode()) if c.trace_type.value == "EndTransaction"]
        assert ends and ends[0].beans[0].transaction_state == "ROLLBACK_MESSAGE"
        assert ends[0].beans[0].transaction_id == sent.msg_id and ends[0].beans[0].msg_type == 2
        pubs = [c for m in raw for c in decode(m.body.decode()) if c.trace_type.value == "Pub"]
        assert pubs[0].beans[0].msg_type == 1  # Trans_Msg_Half
    finally:
        await admin.close()
        await producer.shutdown()
