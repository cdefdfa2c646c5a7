"""The real C++ push and pull consumers against rmq-broker."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from rmq.common.topics import retry_topic
from tests.interop.harness import PushGroup, assert_ok
from tests.interop.messages import body_lengths, check_received, mixed_set

pytestmark = pytest.mark.timeout(120)


def produce(cpp, msgs: list[dict]) -> None:
    res = cpp.run({"op": "produce", "messages": msgs})
    assert res["ok"], res
    failed = [(m["keys"], r) for m, r in zip(msgs, res["results"], strict=True) if not r["ok"]]
    assert not failed, failed


def final_deliveries(records: list[dict]) -> list[dict]:
    """Deliveries the listener accepted (RECONSUME_LATER answers excluded)."""
    return [r for r in records if r["status"] == "ok"]


def assert_content(sent: list[dict], got: list[dict]) -> None:
    by_key = {m["keys"]: m for m in sent}
    diffs = []
    for record in got:
        diffs += check_received(by_key[record["keys"]], record)
    assert not diffs, diffs


def test_two_push_consumers_get_every_message_once(cluster, cpp):
    msgs = mixed_set("TopicPush")
    cluster.create_topic("TopicPush")  # routed before the consumers ask for it
    group = PushGroup(cpp, "cg_two", "TopicPush", instances=2, body_len=body_lengths(msgs))
    group.wait_members(2)
    time.sleep(1.0)  # both have rebalanced on NOTIFY_CONSUMER_IDS_CHANGED
    # (a message consumed before that rebalance may legitimately come twice: the
    # first owner's offset is committed only every 5 s; so nothing is sent before)
    produce(cpp, msgs)
    got = group.wait_for(lambda rs: len({r["keys"] for r in rs}) >= len(msgs))
    results = group.stop()
    assert all(r["ok"] for r in results), results
    counts = Counter(r["keys"] for r in got)
    assert set(counts) == {m["keys"] for m in msgs}
    assert [k for k, n in counts.items() if n != 1] == [], counts
    assert_content(msgs, got)
    # the queues are split between the two instances, none consumed by both
    queues = [{r["queue_id"] for r in got if r["consumer"] == i} for i in (0, 1)]
    assert queues[0] and queues[1] and not queues[0] & queues[1], queues
    # orderly sends went to queue arg % 4
    for r in got:
        if "-orderly-" in r["keys"]:
            assert r["queue_id"] == int(r["keys"].rsplit("-", 1)[1]) % 4, r
    cpp.assert_clean_logs()


def test_tag_subscription_filters(cluster, cpp):
    msgs = mixed_set("TopicTags")
    produce(cpp, msgs)
    wanted = [m for m in msgs if m["tags"] in ("TagB", "TagBin")]
    group = PushGroup(cpp, "cg_tags", "TopicTags", expression="TagB || TagBin",
                      body_len=body_lengths(msgs))
    got = group.wait_for(lambda rs: len(rs) >= len(wanted), settle=2.0)
    assert_ok(group.stop())
    assert sorted(r["keys"] for r in got) == sorted(m["keys"] for m in wanted)
    assert_content(msgs, got)
    cpp.assert_clean_logs()


def test_reconsume_later_comes_back_through_the_retry_topic(cluster, cpp):
    msgs = mixed_set("TopicRetry")[:8]
    produce(cpp, msgs[:1])
    failing = [msgs[1]["keys"], msgs[5]["keys"]]
    # the retry topic routed before the consumer starts (else it learns that route
    # only at its 30 s refresh; its own heartbeat creates the topic a moment too late)
    cluster.create_topic(retry_topic("cg_retry"), queues=1)
    group = PushGroup(cpp, "cg_retry", "TopicRetry", fail_first_keys=failing,
                      body_len=body_lengths(msgs))
    group.wait_members(1)
    produce(cpp, msgs[1:])
    got = group.wait_for(lambda rs: len(final_deliveries(rs)) >= len(msgs), timeout=60)
    assert_ok(group.stop())
    accepted = final_deliveries(got)
    assert sorted(r["keys"] for r in accepted) == sorted(m["keys"] for m in msgs)
    assert_content(msgs, accepted)
    for r in got:
        if r["keys"] in failing and r["status"] == "ok":
            # redelivered from %RETRY%cg_retry, shown under its real topic
            assert r["reconsume_times"] == 1, r
            assert r["props"].get("RETRY_TOPIC") == "TopicRetry", r
            assert r["props"].get("ORIGIN_MESSAGE_ID"), r
        else:
            assert r["reconsume_times"] == 0, r
    assert sorted(r["keys"] for r in got if r["status"] == "later") == sorted(failing)
    assert cluster.max_offset(retry_topic("cg_retry"), 0) == len(failing)
    cpp.assert_clean_logs()


def test_pull_consumer_reads_every_queue_to_its_end(cluster, cpp):
    msgs = mixed_set("TopicPull")
    produce(cpp, msgs)
    lengths = body_lengths(msgs)
    first = cpp.run({"op": "pull", "group": "pull_g", "topic": "TopicPull",
                     "body_len": lengths})
    assert first["ok"], first
    queues = first["queues"]
    assert sorted(q["queue_id"] for q in queues) == [0, 1, 2, 3]
    assert {q["broker"] for q in queues} == {"broker-a"}
    got = [m for q in queues for m in q["messages"]]
    assert sorted(m["keys"] for m in got) == sorted(m["keys"] for m in msgs)
    assert_content(msgs, got)
    # bodies above 4 KiB were stored compressed (zlib, sysFlag bit 0) and inflated
    # by the client: the stored record is smaller than the body it gave back
    big = [m for m in got if "-big-" in m["keys"]]
    assert len(big) == 2 and all(m["store_size"] < m["body_len"] for m in big), big
    for q in queues:
        assert q["statuses"][-1] == "NO_NEW_MSG", q["statuses"]
        assert q["next"] == q["max"] == cluster.max_offset("TopicPull", q["queue_id"])
        assert [m["queue_offset"] for m in q["messages"]] == list(range(q["max"]))
    # start offsets are respected: from max - 1 only the last message of each queue
    offsets = {str(q["queue_id"]): q["max"] - 1 for q in queues}
    tail = cpp.run({"op": "pull", "group": "pull_g", "topic": "TopicPull",
                    "offsets": offsets, "body_len": lengths})
    assert tail["ok"], tail
    for q in tail["queues"]:
        assert [m["queue_offset"] for m in q["messages"]] == [q["max"] - 1], q
    # a tag expression is filtered by the broker for pulls too
    tagged = cpp.run({"op": "pull", "group": "pull_g", "topic": "TopicPull",
                      "expression": "TagBin", "body_len": lengths})
    assert tagged["ok"], tagged
    keys = sorted(m["keys"] for q in tagged["queues"] for m in q["messages"])
    assert keys == sorted(m["keys"] for m in msgs if m["tags"] == "TagBin")
    cpp.assert_clean_logs()
