"""consumerStatus / startMonitoring analysis of ConsumerRunningInfo bodies
(ConsumerRunningInfo.analyzeSubscription / analyzeProcessQueue of 4.9.8), on
bodies shaped as the Java client sends them (MessageQueue object keys)."""

from __future__ import annotations

import time

import pytest

from rmq.common import fastjson
from rmq.tools.admin_consumer import (
    process_queue_problems,
    running_info_text,
    same_subscription,
)

# once: the rmq-admin command line, no compiled/twin pair of its own
pytestmark = pytest.mark.once


def now() -> int:
    return int(time.time() * 1000)


def info(subs: list[tuple[str, str]], started_ago_ms: int, orderly: bool = False,
         queues: dict | None = None, push: bool = True) -> dict:
    body = (b'{"properties":{"PROP_CONSUME_TYPE":"%s","PROP_CONSUMEORDERLY":"%s",'
            b'"PROP_CONSUMER_START_TIMESTAMP":"%d"},"subscriptionSet":[%s],"mqTable":{%s},'
            b'"statusTable":{"T":{"pullRT":1.5,"pullTPS":2,"consumeRT":0.25,"consumeOKTPS":3,'
            b'"consumeFailedTPS":0,"consumeFailedMsgs":7}}}') % (
        b"CONSUME_PASSIVELY" if push else b"CONSUME_ACTIVELY", b"true" if orderly else b"false",
        now() - started_ago_ms,
        b",".join(b'{"classFilterMode":false,"topic":"%s","subString":"%s"}' % (t.encode(), e.encode())
                  for t, e in subs),
        b",".join(b'{"brokerName":"b","queueId":%d,"topic":"T"}:%s' % (q, fastjson.dumps(pq))
                  for q, pq in (queues or {}).items()))
    return fastjson.loads(body)


def test_young_or_pull_consumers_are_not_compared():
    a = info([("T", "*")], 1000)
    b = info([("T", "TagA")], 1000)
    assert same_subscription({"a": a, "b": b})
    old_pull = info([("T", "*")], 10 * 60_000, push=False)
    assert same_subscription({"a": old_pull, "b": info([("U", "*")], 10 * 60_000, push=False)})


def test_push_consumers_running_two_minutes_must_agree():
    a = info([("T", "*"), ("U", "x")], 3 * 60_000)
    assert same_subscription({"a": a, "b": info([("U", "x"), ("T", "*")], 3 * 60_000)})
    assert not same_subscription({"a": a, "b": info([("T", "*")], 3 * 60_000)})
    assert not same_subscription({"a": info([], 3 * 60_000)})


def test_concurrent_queue_holding_messages_for_a_minute_is_reported():
    t = now()
    stuck = {"cachedMsgCount": 5, "lastConsumeTimestamp": t - 90_000}
    idle = {"cachedMsgCount": 0, "lastConsumeTimestamp": t - 90_000}
    busy = {"cachedMsgCount": 5, "lastConsumeTimestamp": t}
    text = process_queue_problems("c1", info([("T", "*")], 0, queues={0: stuck, 1: idle, 2: busy}))
    (line,) = text.splitlines()
    assert line.startswith("c1 MessageQueue [topic=T, brokerName=b, queueId=0] can't consume "
                           "for a while, maybe blocked, ")
    assert 90_000 <= int(line.rsplit(" ", 1)[1][:-2]) < 150_000


def test_orderly_queues_not_locked_or_failing_to_unlock_are_reported():
    queues = {0: {"locked": False, "lastLockTimestamp": now() - 5000},
              1: {"locked": True, "droped": True, "tryUnlockTimes": 3},
              2: {"locked": True}}
    lines = process_queue_problems("c1", info([("T", "*")], 0, orderly=True,
                                              queues=queues)).splitlines()
    assert lines[0].startswith("c1 MessageQueue [topic=T, brokerName=b, queueId=0] can't lock "
                               "for a while, ")
    assert lines[1] == "c1 MessageQueue [topic=T, brokerName=b, queueId=1] unlock 3 times, still failed"
    assert len(lines) == 2
    assert process_queue_problems("c1", info([], 0, push=False, queues=queues)) == ""


def test_running_info_text_sections_and_rt_row():
    text = running_info_text(info([("T", "*")], 0, queues={1: {"commitOffset": 42}}))
    assert text.startswith("#Consumer Properties#\nPROP_CONSUMEORDERLY")
    assert "\n\n\n#Consumer Subscription#\n001 Topic: T" in text
    assert f"\n{'T':<32}  {'b':<32}  {1:<4}  {42:<20}\n" in text
    rt = text.split("#Consumer RT&TPS#\n")[1].splitlines()[1]
    assert rt == f"{'T':<32}  {1.5:14.2f} {2:14.2f} {0.25:14.2f} {3:14.2f} {0:18.2f} {7:25d}"
    assert "#Consumer jstack#" not in text
