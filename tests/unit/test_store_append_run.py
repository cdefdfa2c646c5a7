"""The store's append session (``CommitLog.open_run``): when it opens, that it
holds and lets go of the put and dispatch locks, that a run which stored
nothing publishes nothing, and that records appended through it are read
back, dispatched and positioned as the general put leaves them."""

from __future__ import annotations

from rmq.common.message_id import socket_address_bytes
from rmq.store import DefaultMessageStore, MessageStoreConfig
from rmq.store.message import MessageExtBrokerInner

HOST = ("10.0.0.2", 10911)
BORN = ("10.0.0.1", 5000)


def _store(root, **extra) -> DefaultMessageStore:
    cfg = MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=256 * 1024,
                             mappedFileSizeConsumeQueue=20 * 256, maxHashSlotNum=64,
                             maxIndexNum=600, **extra)
    store = DefaultMessageStore(cfg, HOST)
    assert store.load()
    store.start()
    return store


def _general_put(store: DefaultMessageStore, topic: str, queue_id: int) -> None:
    """One message the general way (makes the consume queue and its tail, and
    with its key the first index file)."""
    msg = MessageExtBrokerInner(topic, queue_id, 0, b"first", {"KEYS": "k"}, "KEYS\x01k", 0, 0,
                                1, BORN, HOST, 0, 0)
    assert store.put_message(msg).is_ok()


def test_run_opens_on_a_dispatched_store_and_releases_its_locks(tmp_path):
    store = _store(tmp_path)
    cl = store.commit_log
    try:
        assert cl.open_run(False) is None  # no commit-log file yet
        _general_put(store, "T", 0)
        run = cl.open_run(True)
        assert run is not None and run.index is not None
        assert run.phy == cl.get_max_offset() == store.reput_from_offset
        assert not cl.put_lock.acquire(blocking=False)  # held by the run
        assert run.queue("T", 1) is None  # no such consume queue yet
        assert run.queue("SCHEDULE_TOPIC_XXXX", 0) is None
        assert run.close() is False  # nothing stored: nothing published
        assert cl.put_lock.acquire(blocking=False)
        cl.put_lock.release()
        run.release()  # a second release does nothing
    finally:
        store.shutdown()


def test_run_declines_while_appends_must_go_the_general_way(tmp_path):
    store = _store(tmp_path)
    cl = store.commit_log
    try:
        _general_put(store, "T", 0)
        store.running_flags.make_logics_queue_error()
        assert cl.open_run(False) is None  # not writeable
        store.running_flags.flag_bits = 0
        store.reput_from_offset -= 1  # the commit log not fully dispatched
        assert cl.open_run(False) is None
        assert cl.put_lock.acquire(blocking=False)  # nothing left taken
        cl.put_lock.release()
        store.reput_from_offset += 1
        run = cl.open_run(False)
        assert run is not None  # opens again
        run.close()
    finally:
        store.shutdown()


def test_append_one_is_read_back_dispatched_and_published(tmp_path):
    store = _store(tmp_path)
    cl = store.commit_log
    try:
        _general_put(store, "T", 0)
        run = cl.open_run(True)
        q = run.queue("T", 0)
        assert q is not None and q.qoff == 1
        born = socket_address_bytes(BORN)
        sys_flag = cl.fast_sys_flag(0, born)
        phys = []
        for i in range(3):
            phy = run.phy
            r = run.append_one(q, 0, 0, sys_flag, 7, born, 0, b"body-%d" % i, "T", b"T",
                               f"KEYS\x01k{i}\x02CLUSTER\x01C", 0, f"k{i}", None, 1)
            assert r is not None and r[1].endswith(f"{phy:016X}") and run.phy == phy + r[0]
            phys.append(phy)
        assert run.append_one(q, 0, 0, sys_flag, 7, born, 0, b"x" * (5 << 20), "T", b"T", "",
                              0) is None  # over maxMessageSize: nothing written
        summary = run.publish_queue(q)
        assert summary[:3] == ("T", 0, 4) and summary[5:8] == (3, run.wrote - run.start, 3)
        assert run.close() is True
        assert store.reput_from_offset == cl.get_max_offset() == run.phy
        assert store.get_max_offset_in_queue("T", 0) == 4
        assert store.checkpoint.logics_msg_timestamp == run.store_ts
        for i, phy in enumerate(phys):
            m = store.look_message_by_offset(phy)
            assert (m.topic, m.queue_offset, bytes(m.body)) == ("T", i + 1, b"body-%d" % i)
            assert store.consume_queue_table["T"][0].read_entry(i + 1)[0] == phy
        found = store.query_message("T", "k1", 8, 0, run.store_ts + 60_000)
        assert [bytes(m)[:40] for m in found.message_buffers] == \
            [bytes(store.commit_log.get_message(phys[1], 40))]  # the index key went in
        found.release()
        # the next general put carries on after the run's records
        _general_put(store, "T", 0)
        assert store.get_max_offset_in_queue("T", 0) == 5
    finally:
        store.shutdown()
