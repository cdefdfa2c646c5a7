"""Fast failure on a real broker with a slowed store (``rmqTestPutDelayMillis``):
sends queued behind the slow put are answered SYSTEM_BUSY [TIMEOUT_CLEAN_QUEUE]
or, once the commit-log lock is held past osPageCacheBusyTimeOutMills,
[PCBUSY_CLEAN_QUEUE]; answered sends are never stored; other requests are
served meanwhile."""

from __future__ import annotations

import asyncio
import time

import pytest

from rmq.client.headers import send_header_v2
from rmq.common import fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.testing.cluster import Cluster

R = RequestCode


@pytest.fixture
async def cluster(tmp_path):
    c = Cluster(tmp_path, "sendMessageThreadPoolNums=1\n")
    c.start_broker()
    yield c
    await c.close()


async def send(cluster: Cluster, i: int):
    ext = send_header_v2("pg", "SlowTopic", "TBW102", 4, 0, 0, int(time.time() * 1000), 0,
                         "", False, "broker-a")
    return await cluster.call(R.SEND_MESSAGE_V2, ext, f"m{i}".encode())


async def update_config(cluster: Cluster, text: str) -> None:
    assert (await cluster.call(R.UPDATE_BROKER_CONFIG, body=text.encode())).code == 0


async def max_offset(cluster: Cluster) -> int:
    r = await cluster.call(R.GET_MAX_OFFSET, {"topic": "SlowTopic", "queueId": "0"})
    assert r.code == 0
    return int(r.ext_fields["offset"])


@pytest.mark.timeout(90)
async def test_slow_store_fast_failure(cluster):
    assert (await send(cluster, 0)).code == 0  # auto-creates the topic
    stored = await max_offset(cluster)

    # 1. the put takes 400 ms: the queue behind it times out after 200 ms
    await update_config(cluster, "rmqTestPutDelayMillis=400\nwaitTimeMillsInSendQueue=200\n")
    sends = [asyncio.ensure_future(send(cluster, i)) for i in range(1, 9)]
    await asyncio.sleep(0.1)
    began = time.monotonic()
    info = await cluster.call(R.GET_BROKER_RUNTIME_INFO)  # another pool: served at once
    assert info.code == 0 and time.monotonic() - began < 0.3
    table = fastjson.loads(bytes(info.body))["table"]
    assert int(table["sendThreadPoolQueueSize"]) >= 1
    responses = await asyncio.gather(*sends)
    ok = [r for r in responses if r.code == ResponseCode.SUCCESS]
    busy = [r for r in responses if r.code == ResponseCode.SYSTEM_BUSY]
    assert len(ok) + len(busy) == 8 and len(busy) >= 5, [r.remark for r in responses]
    assert all(r.remark.startswith("[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for "
                                   "a while, period in queue: ") for r in busy)
    await asyncio.sleep(1.0)
    # every SUCCESS is stored exactly once, no answered-busy send ever ran
    assert await max_offset(cluster) == stored + len(ok)
    stored += len(ok)

    # 2. the lock is held past osPageCacheBusyTimeOutMills: the queue is cleared
    await update_config(cluster, "rmqTestPutDelayMillis=1200\nwaitTimeMillsInSendQueue=60000\n"
                                 "osPageCacheBusyTimeOutMills=500\n")
    responses = await asyncio.gather(*(send(cluster, i) for i in range(10, 16)))
    ok = [r for r in responses if r.code == ResponseCode.SUCCESS]
    pcbusy = [r for r in responses if r.code == ResponseCode.SYSTEM_BUSY]
    assert len(ok) >= 1 and len(pcbusy) >= 3, [r.remark for r in responses]
    assert all(r.remark.startswith("[PCBUSY_CLEAN_QUEUE]broker busy") for r in pcbusy)
    await asyncio.sleep(1.5)
    assert await max_offset(cluster) == stored + len(ok)
    stored += len(ok)

    # 3. back to a normal store: every send answered at once
    await update_config(cluster, "rmqTestPutDelayMillis=0\n")
    responses = await asyncio.gather(*(send(cluster, i) for i in range(20, 40)))
    assert all(r.code == ResponseCode.SUCCESS for r in responses)
    assert await max_offset(cluster) == stored + 20
