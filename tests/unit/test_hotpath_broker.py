"""Broker hot paths against a real rmq-namesrv + rmq-broker (raw remoting):
SYNC_FLUSH sends answered through the group commit's loop futures (single and
batch, many in flight), pulls counted in the broker statistics, and
QUERY_CONSUMER_OFFSET's in-memory rule through the store's public
``check_in_disk_by_consume_offset``."""

from __future__ import annotations

import asyncio

import pytest

from rmq.client.codec import encode_batch
from rmq.client.message import Message
from rmq.common import fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.testing.cluster import Cluster
from tests.integration.test_messaging_raw import props, pull, send

R = RequestCode
RC = ResponseCode


async def _runtime(c: Cluster) -> dict[str, str]:
    r = await c.call(R.GET_BROKER_RUNTIME_INFO)
    return fastjson.loads(bytes(r.body))["table"]


@pytest.mark.timeout(90)
async def test_sync_flush_sends_single_and_batch_in_flight(tmp_path):
    c = Cluster(tmp_path, "flushDiskType=SYNC_FLUSH\n")
    c.start_broker()
    try:
        await c.create_topic("SyncT", 4)
        rs = await asyncio.gather(*(
            send(c, "SyncT", b"m%d" % i, i % 4, props(WAIT="true", UNIQ_KEY=f"{i:032X}"))
            for i in range(64)))
        assert all(r.code == RC.SUCCESS for r in rs), [r.remark for r in rs if r.code]
        offsets = sorted(int(r.ext_fields["queueOffset"]) for r in rs
                         if r.ext_fields["queueId"] == "1")
        assert offsets == list(range(16))
        body = encode_batch([Message("SyncT", b"b%d" % i) for i in range(8)])
        r = await send(c, "SyncT", body, 2, "", code=R.SEND_BATCH_MESSAGE, batch=True)
        assert r.code == RC.SUCCESS, r.remark
        assert r.ext_fields["queueOffset"] == "16"
        r = await pull(c, "SyncT", 2, 0)
        assert r.code == RC.SUCCESS and r.ext_fields["maxOffset"] == "24"
    finally:
        await c.close()


@pytest.mark.timeout(90)
async def test_pull_counts_get_totals_and_query_offset_rule(tmp_path):
    c = Cluster(tmp_path)
    c.start_broker()
    try:
        await c.create_topic("StatT", 2)
        # a group that never committed: 0 while the first message is in memory
        r = await c.call(R.QUERY_CONSUMER_OFFSET,
                         {"consumerGroup": "cg", "topic": "StatT", "queueId": "0"})
        assert r.code == RC.SUCCESS and r.ext_fields["offset"] == "0"
        for _ in range(5):
            assert (await send(c, "StatT", b"x" * 100, 0, props(WAIT="true"))).code == 0
        assert (await _runtime(c))["msgGetTotalTodayNow"] == "0"
        r = await pull(c, "StatT", 0, 0)
        assert r.code == RC.SUCCESS
        r = await pull(c, "StatT", 0, 3)
        assert r.code == RC.SUCCESS
        assert (await _runtime(c))["msgGetTotalTodayNow"] == "7"
        r = await c.call(R.QUERY_CONSUMER_OFFSET,
                         {"consumerGroup": "cg", "topic": "StatT", "queueId": "0"})
        assert r.code == RC.SUCCESS and r.ext_fields["offset"] == "0"
    finally:
        await c.close()
