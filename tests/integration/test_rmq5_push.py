"""Apache's official Python client 5.1.2 as a PushConsumer (tests/rmq5/push_client.py)
against a real rmq-broker: QueryAssignment + auto-renewed long-polling receives,
a failed message redelivered with attempt 2, the group shown as CONSUME_PASSIVELY
in ``consumerConnection``; for a FIFO group (``consumeMessageOrderly``,
``retryMaxTimes=1``) a message that keeps failing is given up by the client with
ForwardMessageToDeadLetterQueue and lands in ``%DLQ%<group>``, where a 4.x pull
finds it intact, and the queue goes on in order; a message consumed for longer
than its invisible time is kept invisible by the broker (auto-renew), consumed
once, and its ack sticks."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from rmq.client.codec import decode_messages
from rmq.client.headers import pull_header, send_header_v2
from rmq.common import fastjson
from rmq.common.codes import RequestCode as R
from rmq.common.codes import ResponseCode
from tests.integration.test_messaging_raw import props
from tests.integration.test_pop import create_group
from tests.integration.test_rmq5_producer import TOPIC, cluster, rmq5_cluster  # noqa: F401
from tests.integration.test_rmq5_restart import Lines

pytestmark = [pytest.mark.once, pytest.mark.timeout(150)]

CLIENT = Path(__file__).resolve().parents[2] / "tests" / "rmq5" / "push_client.py"


def start_push(c, group: str, slow_s: float = 10.0) -> tuple[subprocess.Popen, Lines]:
    proc = subprocess.Popen([str(c.python), str(CLIENT), f"127.0.0.1:{c.grpc_port}", TOPIC,
                             group, "90"], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": "", "RMQ5_SLOW_S": str(slow_s)})
    return proc, Lines(proc)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


def consumed(lines: Lines) -> list[dict]:
    return [x["consumed"] for x in list(lines.items) if "consumed" in x]


async def send(c, body: str, qid: int = 0) -> None:
    ext = send_header_v2("pg", TOPIC, "TBW102", 4, qid, 0, int(time.time() * 1000), 0,
                         props(TAGS="TagP", KEYS="kp", WAIT="true"), False, "broker-a")
    r = await c.call(R.SEND_MESSAGE_V2, ext, body.encode())
    assert r.code == ResponseCode.SUCCESS, r.remark


async def test_push_consumer_consumes_and_retries(cluster):  # noqa: F811
    c = cluster
    group = "G5push"
    proc, lines = start_push(c, group)
    try:
        await lines.until(lambda: any("started" in x for x in lines.items), 30)
        time_sent = time.monotonic()
        for body in ("ok0", "ok1", "again0"):
            await send(c, body)

        def finished() -> bool:
            seen = {(x["body"], x["result"]) for x in consumed(lines)}
            return {("ok0", "SUCCESS"), ("ok1", "SUCCESS"), ("again0", "SUCCESS")} <= seen

        await lines.until(finished, 60)
        again = [x for x in consumed(lines) if x["body"] == "again0"]
        assert [(x["attempt"], x["result"]) for x in again] == [(1, "FAILURE"), (2, "SUCCESS")]
        assert all(x["tag"] == "TagP" for x in consumed(lines))
        assert time.monotonic() - time_sent < 60
        online = await c.call(R.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group})
        assert online.code == ResponseCode.SUCCESS, online.remark
        info = fastjson.loads(bytes(online.body))
        assert info["consumeType"] == "CONSUME_PASSIVELY"
        assert TOPIC in info["subscriptionTable"]
        assert not [x for x in lines.items if "error" in x], lines.items
    finally:
        stop(proc)


async def test_fifo_push_consumer_forwards_a_failing_message_to_the_dlq(cluster):  # noqa: F811
    c = cluster
    group = "G5fifo"
    await create_group(c, group, orderly=True, retry_max=1)
    proc, lines = start_push(c, group)
    try:
        await lines.until(lambda: any("started" in x for x in lines.items), 30)
        await send(c, "bad0")
        await send(c, "after0")
        await lines.until(lambda: any(x["body"] == "after0" for x in consumed(lines)), 60)
        order = [(x["body"], x["result"]) for x in consumed(lines)]
        # retryMaxTimes=1: two attempts (the client's local retry), then the DLQ, then the next
        assert order == [("bad0", "FAILURE"), ("bad0", "FAILURE"), ("after0", "SUCCESS")], order
        dlq = f"%DLQ%{group}"
        r = await c.call(R.PULL_MESSAGE, pull_header("cg4", dlq, 0, 0, 32, 4, 0, 0, "*", 0,
                                                     "TAG", "broker-a"))
        assert r.code == ResponseCode.SUCCESS, r.remark
        msgs = decode_messages(r.body)
        assert [m.body for m in msgs] == [b"bad0"]
        m = msgs[0]
        assert m.properties["TAGS"] == "TagP" and m.properties["KEYS"] == "kp"
        assert m.properties["RETRY_TOPIC"] == TOPIC
        assert m.properties.get("ORIGIN_MESSAGE_ID")
        assert not [x for x in lines.items if "error" in x], lines.items
    finally:
        stop(proc)


# a pop is invisible for 4 s; the endpoint renews a handle 2.5 s before its end
RENEW = ("defaultInvisibleTimeMills=4000\nrenewAheadTimeMillis=2500\n"
         "renewSchedulePeriodMillis=500\n")


@pytest.fixture
async def renew_cluster(tmp_path):
    async for c in rmq5_cluster(tmp_path, RENEW):
        yield c


def acked(lines: Lines) -> list[dict]:
    return [x["acked"] for x in list(lines.items) if "acked" in x]


async def test_push_consumer_slower_than_the_invisible_time_is_not_redelivered(
        renew_cluster):
    """The listener takes 10 s of a 4 s invisible time: the broker renews the
    handle, the message is consumed once, the ack with the handle the client
    got sticks, and nothing comes back afterwards."""
    c = renew_cluster
    group = "G5renew"
    proc, lines = start_push(c, group, slow_s=10.0)
    try:
        await lines.until(lambda: any("started" in x for x in lines.items), 30)
        await send(c, "slow0")
        await send(c, "ok0", qid=1)
        await lines.until(lambda: any(x["body"] == "slow0" for x in acked(lines)), 40)
        # a redelivery would come 4 s (+ the revive scan) after the last handle's end
        deadline = time.monotonic() + 8
        await lines.until(lambda: time.monotonic() > deadline, 12)
        bodies = sorted(x["body"] for x in consumed(lines))
        assert bodies == ["ok0", "slow0"], consumed(lines)
        assert all(x["attempt"] == 1 for x in consumed(lines)), consumed(lines)
        assert sorted((x["body"], x["error"]) for x in acked(lines)) == [
            ("ok0", None), ("slow0", None)], acked(lines)
        assert not [x for x in lines.items if "error" in x], lines.items
    finally:
        stop(proc)
