"""The compiled single put's shortcuts leave the store as its twin and its
general ways do: the arrival notice told straight to the controller's
compiled listener (``arrival.arrive``) counts and notifies as the listener
called through Python; the fields of a store, commit log and stats of
another class (read through their attributes, not at their slots) end the
same; the put and reput locks taken at their OS locks are free again after,
a put waits for a put lock another thread holds, and locks of another kind
are taken through their methods."""

from __future__ import annotations

import threading
import time
from types import MethodType, SimpleNamespace

import pytest

from rmq._fast import compiled_or_none
from rmq.broker.controller import BrokerController
from rmq.broker.controller import _on_message_arriving as twin_arriving
from rmq.broker.stats import BrokerStats
from rmq.common.message_id import socket_address_bytes
from rmq.common.topics import SCHEDULE_TOPIC
from rmq.store import DefaultMessageStore, MessageExtBrokerInner, MessageStoreConfig
from rmq.store.single_put import _put_single, put_single
from rmq.testing.store import commit_log_records

HOST = ("10.0.0.2", 10911)
BORN = socket_address_bytes(("10.0.0.1", 5000))
T = "rmq_sys_REVIVE_LOG_DefaultCluster"
_C_ARRIVAL = compiled_or_none("arrival")
_C_PUT = compiled_or_none("store_put")


class _SubStore(DefaultMessageStore):
    """A store of another class: its slotted fields read through attributes."""


class _SubStats(BrokerStats):
    """Stats of another class: likewise."""


class _Lock:
    """A put lock of another kind: taken through its methods, which count."""

    def __init__(self) -> None:
        self.inner = threading.Lock()
        self.calls = 0

    def acquire(self, *a) -> bool:
        self.calls += 1
        return self.inner.acquire(*a)

    def release(self) -> None:
        self.calls += 1
        self.inner.release()

    __enter__ = acquire

    def __exit__(self, *exc) -> None:
        self.release()


def _controller(stats: BrokerStats, heard: list) -> SimpleNamespace:
    """A controller with the broker's kinds of listener forms: one that
    waits (heard), one nobody waits on, one for other topics, one for T."""
    ctl = SimpleNamespace(stats=stats, _runs_forms=[])
    noop = lambda *a: None  # noqa: E731
    add = BrokerController.add_arrival_listener
    add(ctl, lambda *a: heard.append(("waits",) + a), noop,
        waiting=(SimpleNamespace(table={"x": 1}), "table"))
    add(ctl, lambda *a: heard.append(("idle",) + a), noop,
        waiting=(SimpleNamespace(waiters=0), "waiters"))
    add(ctl, lambda *a: heard.append(("other",) + a), noop, topics=frozenset(("X",)))
    add(ctl, lambda *a: heard.append(("T",) + a), noop, topics=frozenset((T,)))
    return ctl


def _store(root, listener, cls=DefaultMessageStore) -> DefaultMessageStore:
    cfg = MessageStoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=64 * 1024,
                             mappedFileSizeConsumeQueue=20 * 64)
    store = cls(cfg, HOST, message_arriving_listener=listener)
    assert store.load()
    store.start()
    for qid in (0, 1):  # a single put needs the queue made
        msg = MessageExtBrokerInner(T, qid, 0, b"x", {}, "", 0, 0, 1, ("10.0.0.1", 5000), HOST,
                                    0, 0)
        assert store.put_message(msg).is_ok()
    return store


def _puts(store, put, n: int = 40) -> list:
    out = []
    for i in range(n):
        r = put(store, T, T.encode(), i % 2, 0, b"b%d" % i, None, None, "TAGS\x01ck", 7 + i, 0,
                1_700_000_000_000 + i, BORN, 0)
        out.append(None if r is None else (r[0], r[2], r[3]))
    return out


def _state(store, ctl, heard, got) -> tuple:
    return (got, commit_log_records(store), dict(store.commit_log.topic_queue_table),
            store.reput_from_offset, ctl.stats.put_total, dict(ctl.stats._put_pending),
            [h[:5] + h[6:] for h in heard], store.stats.put_message_times_total)


@pytest.mark.timeout(60)
@pytest.mark.compiled_only
def test_arrival_told_straight_counts_and_notifies_as_the_listener_call(tmp_path):
    """The compiled put with the controller's compiled listener (told through
    ``arrive``, the stats' fields at their slots) and with stats of another
    class, against the twin put with the twin listener: the same records,
    offsets, counts and notices."""
    seen = []
    for n, (put, arriving, stats_cls) in enumerate((
            (_put_single, twin_arriving, BrokerStats),
            (_C_PUT.put_single, _C_ARRIVAL.on_message_arriving, BrokerStats),
            (_C_PUT.put_single, _C_ARRIVAL.on_message_arriving, _SubStats))):
        heard: list = []
        ctl = _controller(stats_cls(), heard)
        store = _store(tmp_path / str(n), MethodType(arriving, ctl))
        try:
            seen.append(_state(store, ctl, heard, _puts(store, put)))
        finally:
            store.shutdown()
    assert seen[0] == seen[1] == seen[2]
    got, _, _, _, total, pending, heard, _ = seen[0]
    assert None not in got and total == 42 and sum(r[0] for r in pending.values()) == 42
    assert {h[0] for h in heard} == {"waits", "T"} and len(heard) == 84


@pytest.mark.timeout(60)
def test_store_of_another_class_and_locks_of_another_kind_end_the_same(tmp_path):
    """Puts into a store subclass (fields through attributes) whose put lock
    is of another kind (taken through its methods) leave what puts into a
    plain store leave; the plain store's locks are free after its puts."""
    seen = []
    for n, cls in enumerate((DefaultMessageStore, _SubStore)):
        heard: list = []
        ctl = _controller(BrokerStats(), heard)
        store = _store(tmp_path / str(n), MethodType(BrokerController._on_message_arriving, ctl),
                       cls)
        lock = None
        if cls is _SubStore:
            lock = store.commit_log.put_lock = _Lock()
        try:
            seen.append(_state(store, ctl, heard, _puts(store, put_single)))
            if lock is not None:
                assert lock.calls >= 80  # every put took and let go of it
                assert not lock.inner.locked()
            else:
                assert not store.commit_log.put_lock.locked()
                assert store._reput_lock.acquire(blocking=False)  # not held by anybody
                store._reput_lock.release()
        finally:
            store.shutdown()
    assert seen[0][1:] == seen[1][1:] and None not in seen[0][0]
    assert seen[0][0] == seen[1][0]


@pytest.mark.timeout(60)
def test_put_waits_for_a_put_lock_held_elsewhere_and_nests_in_the_reput_lock(tmp_path):
    """A put lock another thread holds: the put waits for it (the lock's own
    acquire), then stores; a reput lock this thread holds already: the put
    takes it once more and leaves it held once, as before."""
    store = _store(tmp_path, None)
    try:
        lock = store.commit_log.put_lock
        lock.acquire()
        done = []
        t = threading.Thread(target=lambda: done.append(_puts(store, put_single, 1)))
        t.start()
        time.sleep(0.2)
        assert not done  # waiting
        lock.release()
        t.join(10)
        assert done == [[(1, done[0][0][1], done[0][0][2])]]
        assert not lock.locked()
        store._reput_lock.acquire()
        try:
            assert _puts(store, put_single, 2)[1][0] == 1  # queue 1's second message
        finally:
            store._reput_lock.release()
        assert store._reput_lock.acquire(blocking=False)  # held by nobody now
        store._reput_lock.release()
        assert not lock.locked()
    finally:
        store.shutdown()


def _twin_and_compiled(tmp_path, run) -> list:
    """``run(store, ctl, put, heard)`` for the twin put and listener, then
    the compiled ones, each on a store of its own: what each returned."""
    seen = []
    for n, (put, arriving) in enumerate(((_put_single, twin_arriving),
                                         (_C_PUT.put_single, _C_ARRIVAL.on_message_arriving))):
        heard: list = []
        ctl = _controller(BrokerStats(), heard)
        store = _store(tmp_path / str(n), MethodType(arriving, ctl))
        try:
            seen.append(run(store, ctl, put, heard))
        finally:
            store.shutdown()
    return seen


@pytest.mark.timeout(60)
@pytest.mark.compiled_only
def test_puts_across_queues_and_folds_count_into_the_table_of_their_time(tmp_path):
    """Puts that rotate over queue ids (each queue's key and pending row kept
    by the compiled put and listener) with the stats folded between them and
    the commit log's queue table once made anew (as a recovery does): each
    put counted into the pending table of its time, none into a table a fold
    took away, each queue's offset in the queue table of its time; the same
    tables, totals and records as the twin's."""
    def run(store, ctl, put, heard) -> tuple:
        tables = []
        for round_ in range(4):
            got = _puts(store, put, 7)
            tables.append((got, dict(ctl.stats._put_pending)))
            ctl.stats._fold_puts(0)
            if round_ == 1:
                cl = store.commit_log
                cl.topic_queue_table = {(t, int(str(q))): v  # (equal keys, other objects)
                                        for (t, q), v in cl.topic_queue_table.items()}
        return tables, _state(store, ctl, heard, [])

    seen = _twin_and_compiled(tmp_path, run)
    assert seen[0] == seen[1]
    tables = seen[0][0]
    assert [sum(r[0] for r in t.values()) for _, t in tables] == [7 + 2, 7, 7, 7]


@pytest.mark.timeout(60)
@pytest.mark.compiled_only
def test_puts_of_two_topics_to_the_same_queue_ids_end_as_the_twins(tmp_path):
    """Puts that alternate between two topics over the same queue ids (each
    taking the other's kept key for its queue id): the same records, queue
    offsets, queue table and counts as the twin's."""
    def run(store, ctl, put, heard) -> tuple:
        for qid in (0, 1):  # the second topic's queues made
            msg = MessageExtBrokerInner("U", qid, 0, b"x", {}, "", 0, 0, 1,
                                        ("10.0.0.1", 5000), HOST, 0, 0)
            assert store.put_message(msg).is_ok()
        got = []
        for i in range(24):
            topic = (T, "U")[(i // 2) % 2]
            r = put(store, topic, topic.encode(), i % 2, 0, b"b%d" % i, None, None,
                    "TAGS\x01ck", 7 + i, 0, 1_700_000_000_000 + i, BORN, 0)
            got.append(None if r is None else (r[0], r[2], r[3]))
        return _state(store, ctl, heard, got)

    seen = _twin_and_compiled(tmp_path, run)
    assert seen[0] == seen[1]
    assert None not in seen[0][0] and seen[0][2][("U", 1)] == 7


@pytest.mark.timeout(60)
@pytest.mark.compiled_only
def test_a_put_to_the_schedule_topic_is_left_to_the_general_way(tmp_path):
    """The delay levels' topic (its queues made by the schedule service) is
    never put by the single put, twin or compiled: nothing done."""
    def run(store, ctl, put, heard) -> tuple:
        before = _state(store, ctl, heard, [])
        for qid in (0, 1):
            assert put(store, SCHEDULE_TOPIC, SCHEDULE_TOPIC.encode(), qid, 0, b"b", None,
                       None, "TAGS\x01ck", 7, 0, 1_700_000_000_000, BORN, 0) is None
        return before == _state(store, ctl, heard, [])

    assert _twin_and_compiled(tmp_path, run) == [True, True]
