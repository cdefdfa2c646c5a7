"""Apache's official RocketMQ 5.x Python client (PyPI ``rocketmq-python-client``
5.1.2) as a SimpleConsumer against a real rmq-broker's gRPC endpoint
(tests/rmq5/consumer_client.py in its own virtualenv, as test_rmq5_producer):
receive + ack of messages sent around its first receive, redelivery after the
invisible time, tag filters, and a change of invisible duration whose returned handle acks
for good (Apache proxy issue 9583 must not happen here)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from pathlib import Path

import pytest

from rmq.client.headers import send_header_v2
from rmq.common.codes import RequestCode as R
from rmq.common.codes import ResponseCode
from tests.integration.test_messaging_raw import props
from tests.integration.test_rmq5_producer import TOPIC, cluster  # noqa: F401 (fixture)

pytestmark = [pytest.mark.once, pytest.mark.timeout(120)]

CLIENT = Path(__file__).resolve().parents[2] / "tests" / "rmq5" / "consumer_client.py"
GROUP = "G5"


def start_consumer(c, scenario: str, count: int, tags: str = "*") -> subprocess.Popen:
    return subprocess.Popen([str(c.python), str(CLIENT), f"127.0.0.1:{c.grpc_port}", scenario,
                             TOPIC, GROUP, str(count), tags], stdout=subprocess.PIPE, text=True)


async def finish(proc: subprocess.Popen, timeout: float = 90) -> list[dict]:
    out, _ = await asyncio.to_thread(proc.communicate, timeout=timeout)
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert not [x for x in lines if "error" in x], lines
    assert lines and lines[-1] == {"done": True}, lines
    return lines


async def send_n(c, n: int, tag: str = "TagA") -> list[str]:
    bodies = [f"{tag}{i}" for i in range(n)]
    for i, body in enumerate(bodies):
        ext = send_header_v2("pg", TOPIC, "TBW102", 4, i % 4, 0, int(time.time() * 1000), 0,
                             props(TAGS=tag, WAIT="true"), False, "broker-a")
        r = await c.call(R.SEND_MESSAGE_V2, ext, body.encode())
        assert r.code == ResponseCode.SUCCESS, r.remark
    return bodies


async def test_receive_and_ack_of_messages_sent_around_the_first_receive(cluster):  # noqa: F811
    c = cluster
    proc = start_consumer(c, "ack", 4)
    await asyncio.sleep(3)  # its first receives reach the empty queues first
    bodies = await send_n(c, 4)
    lines = await finish(proc)
    got = [x["got"] for x in lines if "got" in x]
    assert sorted(g["body"] for g in got) == bodies
    assert all(g["tag"] == "TagA" and g["attempt"] == 1 for g in got)
    assert len([x for x in lines if "acked" in x]) == 4


async def test_redelivery_after_the_invisible_time(cluster):  # noqa: F811
    c = cluster
    bodies = await send_n(c, 2)
    lines = await finish(start_consumer(c, "redeliver", 2))
    got = [x["got"] for x in lines if "got" in x]
    assert sorted(g["body"] for g in got) == sorted(bodies * 2)
    assert sorted(g["attempt"] for g in got) == [1, 1, 2, 2]


async def test_change_invisible_duration_then_ack_sticks(cluster):  # noqa: F811
    c = cluster
    await send_n(c, 2)
    lines = await finish(start_consumer(c, "change", 2))
    assert len([x for x in lines if "changed" in x]) == 2
    assert {"after_change": 0} in lines  # acked with the new handle: nothing comes back


async def test_tag_filter(cluster):  # noqa: F811
    c = cluster
    await send_n(c, 3, "TagB")
    wanted = await send_n(c, 3, "TagC")
    lines = await finish(start_consumer(c, "ack", 3, "TagC||TagD"))
    got = [x["got"] for x in lines if "got" in x]
    assert sorted(g["body"] for g in got) == wanted
    assert {g["tag"] for g in got} == {"TagC"}
