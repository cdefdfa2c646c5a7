"""The DLedger commit log behind the store's CommitLog interface: a store made
with ``commit_log=DLedgerCommitLog`` on a one-member group puts through the
same calls as a plain store; the append result carries the quorum wait, which
the async and callback puts complete on, and the committed messages are
dispatched and read back."""

from __future__ import annotations

import asyncio

import pytest

from rmq._fast import compiled_or_none
from rmq.client.codec import encode_batch
from rmq.client.message import Message
from rmq.dledger import commit_log as commit_log_mod
from rmq.dledger.commit_log import DLedgerCommitLog
from rmq.dledger.entry import BODY_OFFSET
from rmq.store import (
    BrokerRole,
    DefaultMessageStore,
    GetMessageStatus,
    MessageExtBatch,
    MessageStoreConfig,
    PutMessageStatus,
)
from rmq.store.results import AppendMessageStatus
from rmq.testing.procs import free_port
from rmq.testing.wait import wait_until
from tests.unit.test_store_basic import HOST, make_msg

pytestmark = pytest.mark.timeout(60)

_DISPATCH = compiled_or_none("store_dispatch")


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


def _batch(count: int, body_len: int) -> MessageExtBatch:
    wire = encode_batch([Message("T", b"x" * body_len) for _ in range(count)])
    return MessageExtBatch(topic="T", queue_id=0, body=wire, properties_string="WAIT\x01true",
                           born_host=("10.0.0.1", 1))


def test_a_batch_is_checked_as_a_plain_one_with_room_for_each_entry_header(tmp_path):
    """Both commit logs check a batch the same way (CommitLog._prepare_batch);
    only the bound differs: a DLedger file also holds an entry header per record."""
    plain = DefaultMessageStore(MessageStoreConfig(
        storePathRootDir=str(tmp_path / "plain"), mappedFileSizeCommitLog=64 * 1024), HOST)
    assert plain.load()
    dledger = DefaultMessageStore(_config(tmp_path / "dledger"), HOST,
                                  commit_log=DLedgerCommitLog)
    count, size = 8, 64 * 1024
    body_len = next(n for n in range(7000, 8200) if  # records that fit only without the headers
                    size - BODY_OFFSET * count - 8 < plain.commit_log._prepare_batch(
                        _batch(count, n))[4] <= size - 8)
    try:
        stored = plain.commit_log.put_messages(_batch(count, body_len))
        assert stored.status is AppendMessageStatus.PUT_OK and stored.msg_num == count
        refused = dledger.commit_log.put_messages(_batch(count, body_len))
        assert refused.status is AppendMessageStatus.MESSAGE_SIZE_EXCEEDED
        topic, props, _born, _flag, total, n = dledger.commit_log._prepare_batch(
            _batch(count, body_len - 100), BODY_OFFSET)
        assert (topic, props, n) == (b"T", b"WAIT\x01true", count)
        assert total + BODY_OFFSET * count + 8 <= size
        for log in (plain.commit_log, dledger.commit_log):
            for body in (b"", b"\x00\x00\x00\x05junk"):  # no message, a malformed one
                bad = MessageExtBatch(topic="T", queue_id=0, body=body)
                assert log.put_messages(bad).status is AppendMessageStatus.MESSAGE_SIZE_EXCEEDED
    finally:
        plain.shutdown()


async def _dispatched_queues(root, by_do_reput: bool) -> tuple[list[bytes], int]:
    """Puts of 4 queues over several data files, each awaited, on a group of
    one; the consume-queue files' bytes afterwards, and the puts' count."""
    store = DefaultMessageStore(_config(root, mappedFileSizeCommitLog=16 * 1024,
                                        mappedFileSizeConsumeQueue=20 * 1024),
                                HOST, commit_log=DLedgerCommitLog)
    assert store.load()
    store.start()
    server = store.commit_log.server
    if by_do_reput:  # the general reput instead of the commit log's own
        server.commit_listeners[:] = [lambda _index: store.do_reput()]
    await server.start()
    count = 240
    try:
        await wait_until(server.member_state.is_leader, 10, 0.02, "a leader")
        for i in range(count):
            result = await store.async_put_message(make_msg(i, qid=i % 4))
            assert result.status is PutMessageStatus.PUT_OK
        cl = store.commit_log
        assert len(cl.mfq.mapped_files) >= 3  # the walks met the files' ends
        assert store.reput_from_offset == cl.dledger.committed_pos
        cl.reput_committed(0)  # nothing new: nothing moves
        assert store.reput_from_offset == cl.dledger.committed_pos
        for qid in range(4):
            assert store.get_max_offset_in_queue("T", qid) == count // 4
            got = store.get_message("g", "T", qid, 0, 32)
            assert got.status is GetMessageStatus.FOUND and got.message_count == 32
        queues = [bytes(mf.view[:mf.wrote_position])
                  for qid in range(4)
                  for mf in store.find_consume_queue("T", qid).mfq.mapped_files]
    finally:
        await server.shutdown()
        store.shutdown()
    return queues, count


@pytest.mark.asyncio
async def test_the_commit_logs_reput_dispatches_as_do_reput(tmp_path):
    """The group's commit listener (``reput_committed``: the committed
    entries of one data file walked in one call, the rest through
    ``do_reput``) leaves the same consume-queue files as ``do_reput`` does,
    across data files."""
    own, count = await _dispatched_queues(tmp_path / "own", False)
    general, _ = await _dispatched_queues(tmp_path / "general", True)
    assert own == general and sum(len(q) for q in own) == 20 * count


@pytest.mark.compiled_only
@pytest.mark.asyncio
async def test_the_compiled_commit_listener_dispatches_as_its_twin(tmp_path, monkeypatch):
    """``reput_committed`` compiled (``store_dispatch.reput_committed``: the
    reput lock at its OS lock, the data file walked in place) and its twin
    (``commit_log._reput_committed``) leave the same consume-queue files,
    across data files, and the reput lock free."""
    assert _DISPATCH is not None
    _DISPATCH.bind_reput(BrokerRole.SLAVE)
    got = []
    for name, listener in (("twin", commit_log_mod._reput_committed),
                           ("compiled", _DISPATCH.reput_committed)):
        monkeypatch.setattr(DLedgerCommitLog, "reput_committed", listener)
        got.append(await _dispatched_queues(tmp_path / name, False))
    assert got[0] == got[1] and sum(len(q) for q in got[0][0]) == 20 * got[0][1]


@pytest.mark.compiled_only
@pytest.mark.parametrize("held", [False, True])
def test_the_compiled_commit_listener_takes_and_gives_the_reput_lock(tmp_path, held):
    """The compiled listener on a store whose reput lock this thread holds
    already (re-entered, as the RLock's method does) or nobody holds: the
    lock is as it was afterwards."""
    assert _DISPATCH is not None
    _DISPATCH.bind_reput(BrokerRole.SLAVE)
    store = DefaultMessageStore(_config(tmp_path), HOST, commit_log=DLedgerCommitLog)
    assert store.load()
    try:
        cl = store.commit_log
        mf = cl.mfq.get_last_mapped_file(0, True)
        mf.wrote_position = 64  # zeros: no entry, the walk stops at once
        cl.dledger.committed_pos = 64
        lock = store._reput_lock
        if held:
            lock.acquire()
        try:
            _DISPATCH.reput_committed(cl, 0)
            assert lock._is_owned() == held and store.reput_from_offset == 0
        finally:
            if held:
                lock.release()
        assert not lock._is_owned() and lock.acquire(blocking=False)
        lock.release()
    finally:
        store.shutdown()


async def _followed_queues(root, listener) -> tuple[list[bytes], list[tuple]]:
    """A follower broker (a slave) handed 30 pushes of 4 entries through its
    group's remoting server, ``listener`` its commit listener: the
    consume-queue files' bytes afterwards, and what its arrival listener
    was told."""
    from bench.connection import Connection
    from bench.dledger_follow import QUEUES, TOPIC, _follower, pushes, serving

    root.mkdir()
    controller, server = await _follower(root)
    told: list[tuple] = []
    store = controller.message_store
    store.message_arriving_listener = lambda *args: told.append(args)
    server.commit_listeners[:] = [lambda index: listener(store.commit_log, index)]
    try:
        connection = Connection(serving(server))
        for frame in pushes(30, 4):
            connection.serve(None, frame, 0, len(frame))
        assert server.store.ledger_end_index == 119 and server.store.committed_index == 115
        assert store.reput_from_offset == store.commit_log.dledger.committed_pos
        assert [store.get_max_offset_in_queue(TOPIC, q) for q in range(QUEUES)] == [15] * 4 + \
            [14] * 4
        return [bytes(mf.view[:mf.wrote_position]) for q in range(QUEUES)
                for mf in store.find_consume_queue(TOPIC, q).mfq.mapped_files], told
    finally:
        await controller.shutdown()


@pytest.mark.asyncio
async def test_a_followers_commit_listener_dispatches_as_do_reput(tmp_path):
    """A follower's (a slave's) commit listener, twin and compiled, walks
    what each push commits as ``do_reput`` dispatches it: the same
    consume-queue files, and no arrival listener told (a slave serves no
    long polls)."""
    listeners = [commit_log_mod._reput_committed,
                 lambda cl, _index: cl.store.do_reput()]
    if _DISPATCH is not None:
        _DISPATCH.bind_reput(BrokerRole.SLAVE)
        listeners.append(_DISPATCH.reput_committed)
    got = [await _followed_queues(tmp_path / str(i), listener)
           for i, listener in enumerate(listeners)]
    assert all(g == got[0] for g in got) and got[0][1] == []
    assert sum(len(q) for q in got[0][0]) == 20 * 116
