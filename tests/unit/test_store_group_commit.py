"""SYNC_FLUSH group commit for puts on the event loop: many puts in flight
are answered by few flush rounds (one loop wake-up per round), in offset
order, and a flush that never comes ends in FLUSH_DISK_TIMEOUT."""

from __future__ import annotations

import asyncio

import pytest

from rmq.store import DefaultMessageStore, FlushDiskType, PutMessageStatus
from tests.unit.test_store_basic import HOST, make_msg, small_config


def sync_store(tmp_path, **kw) -> DefaultMessageStore:
    s = DefaultMessageStore(small_config(tmp_path, flushDiskType=FlushDiskType.SYNC_FLUSH,
                                         mappedFileSizeCommitLog=1024 * 1024, **kw), HOST)
    assert s.load()
    s.start()
    return s


@pytest.mark.timeout(30)
async def test_put_message_then_answers_every_put_after_its_flush(tmp_path):
    s = sync_store(tmp_path)
    rounds = []
    service = s.flush_service
    resolve = service._resolve

    def counting_resolve(flushed: int) -> None:
        rounds.append(flushed)
        resolve(flushed)

    service._resolve = counting_resolve
    try:
        loop = asyncio.get_running_loop()
        futures = []
        for i in range(200):
            fut = loop.create_future()
            assert s.put_message_then(make_msg(i, qid=i % 4), fut.set_result) is None
            futures.append(fut)
        results = await asyncio.wait_for(asyncio.gather(*futures), 10)
        flushed = s.commit_log.mfq.flushed_where
        ends = [r.append_result.wrote_offset + r.append_result.wrote_bytes for r in results]
        assert all(r.status is PutMessageStatus.PUT_OK for r in results)
        assert ends == sorted(ends) and ends[-1] <= flushed
        assert 1 <= len(rounds) < 200  # grouped: fewer wake-ups than puts
    finally:
        s.shutdown()


@pytest.mark.timeout(30)
async def test_async_put_and_batch_then_under_sync_flush(tmp_path):
    s = sync_store(tmp_path)
    try:
        r = await s.async_put_message(make_msg(1))
        assert r.status is PutMessageStatus.PUT_OK
        assert s.commit_log.mfq.flushed_where >= r.append_result.wrote_offset + r.append_result.wrote_bytes
        # WAIT=false: answered at once, no flush wait
        m = make_msg(2, extra={"WAIT": "false"})
        done = []
        r = s.put_message_then(m, done.append)
        assert r is not None and r.status is PutMessageStatus.PUT_OK and not done
    finally:
        s.shutdown()


@pytest.mark.timeout(30)
async def test_flush_that_never_comes_times_out(tmp_path):
    s = sync_store(tmp_path, syncFlushTimeout=200)
    try:
        s.flush_service.shutdown()  # nobody flushes any more
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        assert s.put_message_then(make_msg(1), fut.set_result) is None
        result = await asyncio.wait_for(fut, 5)
        assert result.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
        assert result.append_result is not None  # stored, only not flushed in time
    finally:
        s.shutdown()
