"""ali-ons (npm, pure JavaScript RocketMQ 4.x remoting client) against rmq, and
messages crossing between it and the C++ client in both directions."""

from __future__ import annotations

import time

import pytest

from tests.interop.harness import OnsRunner, PushGroup, ensure_node_clients
from tests.interop.messages import body_lengths, check_received, mixed_set

pytestmark = pytest.mark.timeout(120)

# ali-ons asks for the %RETRY% route before its first heartbeat has created the retry
# topic (Java clients do the same); the next route refresh finds it.
RETRY_ROUTE_MISSING = ("RouteInfoFromNameServer is not exist value %RETRY%",
                       "No topic route info in name server for the topic: %RETRY%")


@pytest.fixture
def ons(tmp_path, cluster):
    ensure_node_clients()
    runner = OnsRunner(tmp_path / "ons", cluster)
    runner.tmp.mkdir()
    yield runner
    runner.close()


def unexpected(problems: list[str], expected: tuple[str, ...] = ()) -> list[str]:
    return [p for p in problems if not any(e in p for e in expected)]


def sync_only(msgs: list[dict]) -> list[dict]:
    """ali-ons has no oneway or selector API here: every message goes as a sync send."""
    return [dict(m, mode="sync") for m in msgs]


def test_ali_ons_producer_to_cpp_pull_consumer(cluster, ons, cpp):
    cluster.create_topic("OnsToCpp")
    msgs = sync_only(mixed_set("OnsToCpp", prefix="ons"))
    sent = ons.run({"op": "produce", "messages": msgs})
    assert sent["ok"], sent
    assert all(r["ok"] and r["status"] == "SEND_OK" for r in sent["results"]), sent["results"]
    assert unexpected(sent["problems"], ("updateTopicPublishInfo() prev is not null",)) == []
    pulled = cpp.run({"op": "pull", "group": "ons_pull", "topic": "OnsToCpp",
                      "body_len": body_lengths(msgs)})
    assert pulled["ok"], pulled
    got = [m for q in pulled["queues"] for m in q["messages"]]
    assert sorted(m["keys"] for m in got) == sorted(m["keys"] for m in msgs)
    by_key = {m["keys"]: m for m in msgs}
    assert [d for g in got for d in check_received(by_key[g["keys"]], g, uniq_key=False)] == []
    # the queue and offset ali-ons was told match where the C++ client found each one
    where = {g["keys"]: (g["queue_id"], g["queue_offset"]) for g in got}
    for m, r in zip(msgs, sent["results"], strict=True):
        assert where[m["keys"]] == (r["queue_id"], r["offset"]), m["keys"]
    cpp.assert_clean_logs()


def test_cpp_producer_to_ali_ons_consumers_with_retry(cluster, ons, cpp):
    cluster.create_topic("CppToOns")
    msgs = mixed_set("CppToOns", prefix="cpp")
    failing = [msgs[2]["keys"]]
    group = PushGroup(ons, "ons_cg", "CppToOns", instances=2, fail_first_keys=failing)
    group.wait_members(2)
    # ali-ons ignores NOTIFY_CONSUMER_IDS_CHANGED and rebalances on its timer only
    # (rebalanceInterval=2000 in the driver): let both instances settle first
    time.sleep(3.0)
    res = cpp.run({"op": "produce", "messages": msgs})
    assert res["ok"] and all(r["ok"] for r in res["results"]), res
    got = group.wait_for(
        lambda rs: len({r["keys"] for r in rs if r["status"] == "ok"}) >= len(msgs), timeout=60)
    results = group.stop()
    assert all(r["ok"] for r in results), results
    for r in results:
        assert unexpected(r["problems"], RETRY_ROUTE_MISSING) == [], r["problems"]
    accepted = [r for r in got if r["status"] == "ok"]
    assert sorted(r["keys"] for r in accepted) == sorted(m["keys"] for m in msgs)
    by_key = {m["keys"]: m for m in msgs}
    assert [d for g in accepted for d in check_received(by_key[g["keys"]], g)] == []
    retried = [r for r in accepted if r["keys"] in failing]
    assert retried[0]["reconsume_times"] == 1
    assert retried[0]["props"].get("RETRY_TOPIC") == "CppToOns"
    cpp.assert_clean_logs()


def test_ali_ons_unknown_topic_is_refused(cluster, ons):
    res = ons.run({"op": "produce", "messages": sync_only(mixed_set("NoSuchOnsTopic")[:1])})
    assert res["ok"], res
    outcome = res["results"][0]
    assert not outcome["ok"]
    assert "No topic route info in name server for the topic: NoSuchOnsTopic" in outcome["error"]
    assert cluster.route_json("NoSuchOnsTopic") is None

