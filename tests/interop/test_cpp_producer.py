"""The real C++ producer (PyPI ``rocketmq`` 0.4.4) against rmq-namesrv and rmq-broker."""

from __future__ import annotations

import time

import pytest

from tests.interop.messages import mixed_set, text_message

pytestmark = pytest.mark.timeout(90)


def stored(cluster, topic: str, queues: int = 4) -> int:
    return sum(cluster.max_offset(topic, q) for q in range(queues))


def test_sends_of_every_kind_are_stored(cluster, cpp):
    msgs = mixed_set("TopicSend")
    res = cpp.run({"op": "produce", "messages": msgs})
    assert res["ok"], res
    results = res["results"]
    assert len(results) == len(msgs)
    failed = [(m["keys"], r) for m, r in zip(msgs, results, strict=True) if not r["ok"]]
    assert not failed, failed
    for m, r in zip(msgs, results, strict=True):
        if m["mode"] != "oneway":
            assert r["status"] == "OK" and len(r["msg_id"]) == 32, (m["keys"], r)
    # orderly sends: arg % 4 picks the queue, so the second one of a queue lands later
    orderly = [r["offset"] for m, r in zip(msgs, results, strict=True) if m["mode"] == "orderly"]
    assert all(orderly[q] < orderly[q + 4] for q in range(4)), orderly
    deadline = time.monotonic() + 10
    while stored(cluster, "TopicSend") < len(msgs):  # oneway sends land a little later
        assert time.monotonic() < deadline, stored(cluster, "TopicSend")
        time.sleep(0.2)
    assert stored(cluster, "TopicSend") == len(msgs)
    cpp.assert_clean_logs()


def test_unknown_topic_is_auto_created_through_tbw102(cluster, cpp):
    assert cluster.route_json("FreshTopic") is None
    res = cpp.run({"op": "produce", "messages": [text_message("FreshTopic", "f-1")]})
    assert res["ok"] and res["results"][0]["ok"], res
    # the broker registers the new topic with a oneway REGISTER_BROKER: wait for it
    deadline = time.monotonic() + 10
    while (route := cluster.route_json("FreshTopic")) is None:
        assert time.monotonic() < deadline, "FreshTopic never reached the name server"
        time.sleep(0.1)
    assert cluster.broker_addr in route
    cpp.assert_clean_logs()


def test_unknown_topic_without_auto_create_surfaces_the_error(cluster_factory, tmp_path):
    from tests.interop.harness import CppRunner

    cluster = cluster_factory(auto_create=False)
    cpp = CppRunner(tmp_path, cluster)
    assert cluster.route_json("TBW102") is None
    res = cpp.run({"op": "produce", "messages": [text_message("NoSuchTopic", "n-1")]})
    assert res["ok"], res
    outcome = res["results"][0]
    assert not outcome["ok"]
    assert "ProducerSendSyncFailed" in outcome["error"]
    assert "No route info of this topic" in outcome["error"] and "NoSuchTopic" in outcome["error"]
    assert cluster.route_json("NoSuchTopic") is None
    cpp.assert_clean_logs(expected=("No route info of this topic: NoSuchTopic",))
