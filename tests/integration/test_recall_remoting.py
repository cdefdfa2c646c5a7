"""The recall handle of a remoting send (``recallHandle`` of 5.3.3's
SendMessageResponseHeader) against a real rmq-namesrv + rmq-broker: a timer
message's answer carries it, RECALL_MESSAGE with it succeeds and the message
never arrives; a plain message's answer has none."""

from __future__ import annotations

import asyncio
import base64
import time

import pytest

from rmq.client.codec import decode_messages
from rmq.client.headers import pull_header
from rmq.common.codes import RequestCode, ResponseCode
from rmq.testing.cluster import Cluster
from rmq.testing.messaging import running_cluster
from rmq.testing.wait import wait_until
from tests.integration.test_messaging_raw import props, send

pytestmark = pytest.mark.timeout(60)
TOPIC = "RecallRemoting"


@pytest.fixture
async def cluster(tmp_path):
    async with running_cluster(tmp_path, "recallMessageEnable=true\ntimerPrecisionMs=100\n") as c:
        yield c


async def visible(c: Cluster) -> list[bytes]:
    r = await c.call(RequestCode.PULL_MESSAGE, pull_header(
        "cg_recall", TOPIC, 0, 0, 32, 4, 0, 0, "*", 0, "TAG", "broker-a"))
    return [m.body for m in decode_messages(r.body)] if r.code == ResponseCode.SUCCESS else []


async def test_timer_send_answers_a_recall_handle_that_recalls_it(cluster):
    c = cluster
    await c.create_topic(TOPIC, 1)
    due = int(time.time() * 1000) + 2500
    if due % 100 == 0:  # a due time on a 100 ms boundary belongs to the slot before
        due += 1
    answers = {}
    for body in ("keep", "recall"):
        r = await send(c, TOPIC, body.encode(), 0, props(
            UNIQ_KEY=f"UNIQ{body.upper()}", TIMER_DELIVER_MS=str(due)))
        assert r.code == ResponseCode.SUCCESS, r.remark
        answers[body] = r.ext_fields
    handle = answers["recall"]["recallHandle"]
    raw = base64.urlsafe_b64decode(handle).decode()
    assert raw == f"v1 {TOPIC} broker-a {due // 100 * 100 + 1} UNIQRECALL"

    r = await c.call(RequestCode.RECALL_MESSAGE, {
        "producerGroup": "pg", "topic": TOPIC, "recallHandle": handle})
    assert r.code == ResponseCode.SUCCESS, r.remark
    assert r.ext_fields["msgId"] == "UNIQRECALL"

    plain = await send(c, TOPIC, b"plain", 0, props(UNIQ_KEY="UNIQPLAIN"))
    assert plain.code == ResponseCode.SUCCESS, plain.remark
    assert "recallHandle" not in plain.ext_fields

    async def kept_arrived() -> list[bytes]:
        got = await visible(c)
        assert b"keep" in got
        return got
    await wait_until(kept_arrived, 15, 0.1, "the kept timer message arrived")
    assert int(time.time() * 1000) >= due  # not before its time
    await asyncio.sleep(1)  # the rest of the slot, had it been left in it
    assert sorted(await visible(c)) == [b"keep", b"plain"]  # the recalled one never comes

    late = await c.call(RequestCode.RECALL_MESSAGE, {
        "producerGroup": "pg", "topic": TOPIC, "recallHandle": answers["keep"]["recallHandle"]})
    assert (late.code, late.remark) == (ResponseCode.ILLEGAL_OPERATION,
                                        "recall failed, timestamp invalid")
