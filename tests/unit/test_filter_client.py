"""Client side of SQL92 subscriptions: MessageSelector, ``subscribe`` with a
selector, and what the heartbeat then carries."""

from __future__ import annotations

import orjson
import pytest

from rmq.client import PushConsumer
from rmq.client.heartbeat import HeartbeatData, build_subscription
from rmq.client.message_selector import MessageSelector


def test_selectors():
    assert MessageSelector.by_sql("a > 1") == MessageSelector("SQL92", "a > 1")
    assert MessageSelector.by_tag("TagA || TagB") == MessageSelector("TAG", "TagA || TagB")
    assert MessageSelector.by_tag(None).expression == "*"


def test_subscribe_with_selectors_goes_into_the_heartbeat():
    c = PushConsumer("cg_sel", namesrv_addr="127.0.0.1:9876", listener=lambda m, ctx: None)
    c.subscribe("TopicSql", MessageSelector.by_sql("a > 5 AND region = 'eu'"))
    c.subscribe("TopicTag", MessageSelector.by_tag("TagA || TagB"))
    c.subscribe("TopicStr", "TagC")
    sql, tag, plain = (c.subscriptions[t] for t in ("TopicSql", "TopicTag", "TopicStr"))
    assert (sql.expression_type, sql.sub_string, sql.tags_set) == (
        "SQL92", "a > 5 AND region = 'eu'", [])
    assert (tag.expression_type, tag.tags_set) == ("TAG", ["TagA", "TagB"])
    assert (plain.expression_type, plain.tags_set) == ("TAG", ["TagC"])
    body = orjson.loads(HeartbeatData("cid", [], [c.consumer_data()]).encode())
    subs = {s["topic"]: s for s in body["consumerDataSet"][0]["subscriptionDataSet"]}
    assert subs["TopicSql"]["expressionType"] == "SQL92"
    assert subs["TopicSql"]["subString"] == "a > 5 AND region = 'eu'"
    assert HeartbeatData.decode(orjson.dumps(body)).consumers[0].subscriptions[0] == sql


def test_empty_sql_expression_is_refused():
    with pytest.raises(ValueError, match="Expression can't be null! SQL92"):
        build_subscription("T", "", "SQL92")
    c = PushConsumer("cg_empty", namesrv_addr="127.0.0.1:9876")
    with pytest.raises(ValueError):
        c.subscribe("T", MessageSelector.by_sql(""))
    assert "T" not in c.subscriptions
