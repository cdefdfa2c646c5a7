"""The DLedger commit log behind the store's CommitLog interface: a store made
with ``commit_log=DLedgerCommitLog`` on a one-member group puts through the
same calls as a plain store; the append result carries the quorum wait, which
the async and callback puts complete on, and the committed messages are
dispatched and read back."""

from __future__ import annotations

import asyncio

import pytest

from rmq.dledger.commit_log import DLedgerCommitLog
from rmq.store import DefaultMessageStore, GetMessageStatus, MessageStoreConfig, PutMessageStatus
from rmq.testing.procs import free_port
from rmq.testing.wait import wait_until
from tests.unit.test_store_basic import HOST, make_msg

pytestmark = pytest.mark.timeout(60)


def _config(tmp_path, **kw) -> MessageStoreConfig:
    settings = dict(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=64 * 1024,
                    mappedFileSizeConsumeQueue=20 * 64, maxHashSlotNum=64, maxIndexNum=256,
                    enableDLegerCommitLog=True, dLegerGroup="g", dLegerSelfId="n0",
                    dLegerPeers=f"n0-127.0.0.1:{free_port()}")
    settings.update(kw)
    return MessageStoreConfig(**settings)


@pytest.mark.asyncio
async def test_puts_complete_on_their_quorum_and_are_dispatched(tmp_path):
    store = DefaultMessageStore(_config(tmp_path), HOST, commit_log=DLedgerCommitLog)
    assert store.load()
    store.start()
    server = store.commit_log.server
    await server.start()
    try:
        loop = asyncio.get_running_loop()
        await wait_until(server.member_state.is_leader, 10, 0.02, "a leader")
        result = await store.async_put_message(make_msg(0))
        assert result.status is PutMessageStatus.PUT_OK
        quorum = result.append_result.quorum
        assert quorum.done() and quorum.result() is PutMessageStatus.PUT_OK
        done = loop.create_future()
        assert store.put_message_then(make_msg(1), done.set_result) is None
        later = await asyncio.wait_for(done, 10)
        assert later.status is PutMessageStatus.PUT_OK
        assert later.append_result.wrote_offset == result.append_result.wrote_offset + \
            result.append_result.wrote_bytes + 48  # the next entry's body
        await wait_until(lambda: store.get_max_offset_in_queue("T", 0) >= 2, 10, 0.02,
                         "both dispatched")
        got = store.get_message("g", "T", 0, 0, 32)
        assert got.status is GetMessageStatus.FOUND and got.message_count == 2
    finally:
        await server.shutdown()
        store.shutdown()
    assert not (tmp_path / "commitlog").exists()  # the group's entry files are the log


def test_the_flag_without_the_dledger_commit_log_is_refused(tmp_path):
    with pytest.raises(ValueError, match="DLedger commit log"):
        DefaultMessageStore(_config(tmp_path), HOST)
