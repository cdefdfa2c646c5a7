"""SQL92 property filtering against real rmq-namesrv + rmq-broker processes:
push consumers with a SQL92 selector see only matching messages while a TAG
consumer of another group sees all; CHECK_CLIENT_CONFIG and PULL_MESSAGE
answers (codes and remarks of 4.9.8) for bad, missing and refused
expressions, with ``enablePropertyFilter`` on and off."""

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
    Message,
    Producer,
    PushConsumer,
)
from rmq.client.codec import decode_messages
from rmq.client.headers import PULL_FLAG_SUBSCRIPTION, pull_header
from rmq.client.heartbeat import (
    ConsumerData,
    ConsumeType,
    HeartbeatData,
    MessageModel,
    build_subscription,
)
from rmq.client.message_selector import MessageSelector
from rmq.common.codes import RequestCode, ResponseCode
from rmq.testing.cluster import Cluster
from rmq.testing.messaging import running_cluster
from rmq.testing.wait import wait_until

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(60)]
R = RequestCode
RC = ResponseCode
REFUSED = "The broker does not support consumer to filter message by SQL92"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory):
    async with running_cluster(tmp_path_factory.mktemp("sql92"),
                               "enablePropertyFilter=true\n") as c:
        yield c


def region(i: int) -> str:
    return ("eu", "us", "apac")[i % 3]


async def send_numbered(cluster: Cluster, topic: str, count: int) -> None:
    async with Producer("pg_sql92", client_config=cluster.client_config("sql92-p")) as p:
        for i in range(count):
            props = {"a": str(i), "region": region(i)}
            if i % 5 == 0:
                props["vip"] = "true"
            r = await p.send(Message(topic, b"m%d" % i, tags=f"T{i % 2}", properties=props))
            assert r.msg_id


def push(cluster: Cluster, group: str, name: str, topic: str, expression,
         seen: list[bytes]) -> PushConsumer:
    def on_messages(msgs, ctx):
        seen.extend(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    cfg = ConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    c = PushConsumer(group, listener=on_messages, config=cfg,
                     client_config=cluster.client_config(name))
    c.subscribe(topic, expression)
    return c


async def test_sql92_consumer_sees_only_matching_messages(cluster):
    topic = "TopicSql"
    await cluster.create_topic(topic, 2)
    await send_numbered(cluster, topic, 90)
    selector = "a >= 30 AND region = 'eu' OR (vip IS NOT NULL AND a < 10)"
    expected = {b"m%d" % i for i in range(90)
                if (i >= 30 and region(i) == "eu") or (i % 5 == 0 and i < 10)}
    sql_seen: list[bytes] = []
    all_seen: list[bytes] = []
    sql = push(cluster, "cg_sql", "sql92-c1", topic, MessageSelector.by_sql(selector), sql_seen)
    tag = push(cluster, "cg_tag", "sql92-c2", topic, MessageSelector.by_tag("*"), all_seen)
    await sql.start()
    await tag.start()
    try:
        await wait_until(lambda: len(all_seen) == 90 and len(sql_seen) >= len(expected), 20)
        await asyncio.sleep(0.5)  # nothing else arrives
    finally:
        await sql.shutdown()
        await tag.shutdown()
    assert sorted(sql_seen) == sorted(expected)
    assert sorted(all_seen) == sorted(b"m%d" % i for i in range(90))


async def check_config(cluster: Cluster, expression: str, expression_type="SQL92"):
    sub = build_subscription("TopicSql", expression, expression_type)
    body = orjson.dumps({"clientId": "127.0.0.1@check", "group": "cg_check",
                         "subscriptionData": sub.to_json_obj()})
    return await cluster.call(R.CHECK_CLIENT_CONFIG, None, body)


async def test_check_client_config(cluster):
    r = await check_config(cluster, "a > 5 AND region IN ('eu', 'us')")
    assert r.code == RC.SUCCESS
    r = await check_config(cluster, "TagA || TagB", "TAG")
    assert r.code == RC.SUCCESS
    r = await check_config(cluster, "a > ")
    assert r.code == RC.SUBSCRIPTION_PARSE_FAILED
    assert r.remark == ('Encountered "<EOF>" at line 1, column 5. Was expecting one of: '
                        '<STRING>, <DECIMAL>, <FLOAT>, "TRUE", "FALSE", "NULL", <ID>, "("')
    r = await check_config(cluster, "a = NULL")
    assert (r.code, r.remark) == (RC.SUBSCRIPTION_PARSE_FAILED, "'NULL' cannot be compared.")


async def heartbeat(cluster: Cluster, group: str, topic: str, expression: str,
                    version: int) -> None:
    sub = build_subscription(topic, expression, "SQL92")
    sub.sub_version = version
    data = HeartbeatData(f"127.0.0.1@{group}", [], [ConsumerData(
        group, ConsumeType.CONSUME_PASSIVELY, MessageModel.CLUSTERING,
        ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, [sub])])
    r = await cluster.call(R.HEART_BEAT, None, data.encode())
    assert r.code == RC.SUCCESS


async def raw_pull(cluster: Cluster, group: str, topic: str, offset: int,
                   expression: str | None, version: int = 0, max_nums: int = 32):
    flag = PULL_FLAG_SUBSCRIPTION if expression is not None else 0
    ext = pull_header(group, topic, 0, offset, max_nums, flag, 0, 0, expression, version,
                      "SQL92", "broker-a")
    return await cluster.call(R.PULL_MESSAGE, ext)


async def test_raw_pulls_filter_and_refuse(cluster):
    topic = "TopicSqlRaw"
    await cluster.create_topic(topic, 1)
    await send_numbered(cluster, topic, 12)
    # the subscription carried by the pull
    p = await raw_pull(cluster, "cg_raw", topic, 0, "a BETWEEN 3 AND 5 OR region = 'apac'")
    assert p.code == RC.SUCCESS and p.remark == "FOUND"
    assert [m.body for m in decode_messages(p.body)] == [b"m2", b"m3", b"m4", b"m5", b"m8",
                                                         b"m11"]
    assert p.ext_fields["nextBeginOffset"] == "12"
    # a window without a match: retry at once from past it
    p = await raw_pull(cluster, "cg_raw", topic, 0, "a > 100", max_nums=4)
    assert p.code == RC.PULL_RETRY_IMMEDIATELY and p.remark == "NO_MATCHED_MESSAGE"
    assert p.body is None and p.ext_fields["nextBeginOffset"] == "4"
    # a window with fewer matches than maxMsgNums: the offset still moves past it
    p = await raw_pull(cluster, "cg_raw", topic, 0, "region = 'us'", max_nums=4)
    assert [m.body for m in decode_messages(p.body)] == [b"m1"]
    assert p.ext_fields["nextBeginOffset"] == "4"
    p = await raw_pull(cluster, "cg_raw", topic, 0, "a >")
    assert (p.code, p.remark) == (RC.SUBSCRIPTION_PARSE_FAILED,
                                  "parse the consumer's subscription failed")
    # heartbeat filter data: a bad expression registers none
    await heartbeat(cluster, "cg_bad", topic, "a >>", 10)
    p = await raw_pull(cluster, "cg_bad", topic, 0, None, 10)
    assert (p.code, p.remark) == (
        RC.FILTER_DATA_NOT_EXIST,
        "The broker's consumer filter data is not exist!Your expression may be wrong!")
    # a good one filters pulls without a subscription of their own
    version = int(time.time() * 1000)
    await heartbeat(cluster, "cg_good", topic, "vip = 'true'", version)
    p = await raw_pull(cluster, "cg_good", topic, 0, None, version)
    assert p.code == RC.SUCCESS
    assert [m.body for m in decode_messages(p.body)] == [b"m0", b"m5", b"m10"]
    p = await raw_pull(cluster, "cg_good", topic, 0, None, version + 1)
    assert p.code == RC.SUBSCRIPTION_NOT_LATEST


async def test_refused_without_enable_property_filter(tmp_path):
    async with running_cluster(tmp_path) as c:
        await c.create_topic("TopicOff", 1)
        r = await check_config(c, "a > 1")
        assert (r.code, r.remark) == (RC.SYSTEM_ERROR, REFUSED)
        r = await check_config(c, "TagA", "TAG")
        assert r.code == RC.SUCCESS
        p = await raw_pull(c, "cg_off", "TopicOff", 0, "a > 1")
        assert (p.code, p.remark) == (RC.SYSTEM_ERROR, REFUSED)
