"""The revive records (pop checkpoints, acks, batch acks) stored through the
store's one-record append session (``put_at_once``) are the records the
general put stores: the same commit-log bytes (store timestamps aside), the
same consume-queue entries, queue offsets, statistics and arrival notices;
with the compiled ``append_single`` and with its twin."""

from __future__ import annotations

import asyncio

import pytest

from rmq.broker import pop_revive as pr
from rmq.broker.pop_records import AckMsg, PopCheckPoint
from rmq.store import (
    BrokerRole,
    DefaultMessageStore,
    FlushDiskType,
    MessageStoreConfig,
)
from rmq.store.message_codec import message_properties_to_string
from rmq.testing.store import commit_log_records

HOST = ("10.0.0.2", 10911)
TOPIC = "rmq_sys_REVIVE_LOG_DefaultCluster"
QUEUES = 3


def _config(root) -> MessageStoreConfig:
    cfg = MessageStoreConfig()
    cfg.storePathRootDir = str(root)
    cfg.storePathCommitLog = str(root / "commitlog")
    cfg.mappedFileSizeCommitLog = 64 * 1024  # several file rolls
    cfg.mappedFileSizeConsumeQueue = 20 * 40
    cfg.timerWheelEnable = True
    return cfg


def _records(n: int) -> list[tuple[int, PopCheckPoint | AckMsg, int]]:
    out: list = []
    for i in range(n):
        qid = i % QUEUES
        pt = 1_700_000_000_000 + i * 7
        diffs = list(range(0, 1 + i % 32, 1 + i % 3))
        if i % 3 == 0:
            rec = PopCheckPoint(f"T{i % 5}", "g", i % 8, 1000 + i, pt, 30_000 + i, diffs,
                                "broker-a" if i % 4 else None)
        else:
            rec = AckMsg(f"T{i % 5}", "g", i % 8, 1000 + i, pt, "broker-a",
                         [1000 + i + d for d in diffs])
        out.append((qid, rec, pt + 3))
    return out


async def _fill(root, fast: bool, records) -> tuple[DefaultMessageStore, list, list, int]:
    arrivals: list = []
    store = DefaultMessageStore(_config(root), HOST,
                                message_arriving_listener=lambda *a: arrivals.append(a))
    assert store.load()
    store.start()
    offsets, taken = [], 0
    for qid, rec, now in records:
        body, tag = pr.record_body(rec)
        r = pr.put_at_once(store, TOPIC, qid, body, tag, now) if fast else None
        if r is not None:
            taken += 1
            offsets.append(r[0])
            continue
        offsets.append(await pr.put_general(store, TOPIC, qid, body, tag, now))
    return store, arrivals, offsets, taken


def test_record_properties_is_the_general_property_string():
    for tag in ("ck", "ack", "bAck"):
        for now in (0, 1, 1_700_000_000_123):
            assert pr.record_properties(tag, now) == \
                message_properties_to_string(pr._record_props(tag, now)[0])


@pytest.mark.timeout(90)
async def test_revive_records_at_once_equal_the_general_put(tmp_path):
    records = _records(900)
    a, a_arr, a_off, taken = await _fill(tmp_path / "fast", True, records)
    b, b_arr, b_off, _ = await _fill(tmp_path / "general", False, records)
    try:
        assert taken > 800  # each queue's first record and each file roll go the general way
        assert a_off == b_off and None not in a_off
        recs = commit_log_records(a)
        assert recs == commit_log_records(b) and len(recs) > 900
        assert a.reput_from_offset == a.commit_log.get_max_offset() == b.reput_from_offset
        assert a.commit_log.topic_queue_table == b.commit_log.topic_queue_table
        for qid, cq in b.consume_queue_table[TOPIC].items():
            n = cq.get_max_offset_in_queue()
            assert n == a.get_max_offset_in_queue(TOPIC, qid) > 0
            assert [cq.read_entry(i) for i in range(n)] == \
                [a.consume_queue_table[TOPIC][qid].read_entry(i) for i in range(n)]
        assert [x[:4] + x[5:] for x in a_arr] == [x[:4] + x[5:] for x in b_arr]
        assert a.stats.put_message_times_total == b.stats.put_message_times_total == 900
        assert a.stats.put_message_size_total == b.stats.put_message_size_total
        # what the revive service reads back: the record's tag and body
        m = a.look_message_by_offset(a.consume_queue_table[TOPIC][1].read_entry(2)[0])
        qid, rec, now = records[QUEUES * 2 + 1]
        assert m.body == pr.record_body(rec)[0] and m.properties["TAGS"] == pr.record_body(rec)[1]
        assert m.born_timestamp == now and m.store_host == HOST
    finally:
        a.shutdown()
        b.shutdown()


@pytest.mark.timeout(60)
async def test_at_once_declines_where_the_general_put_decides(tmp_path):
    store = DefaultMessageStore(_config(tmp_path), HOST)
    assert store.load()
    store.start()
    try:
        body, tag = pr.record_body(AckMsg("T", "g", 0, 1, 2, "b", [1]))
        assert pr.put_at_once(store, TOPIC, 0, body, tag, 5) is None  # no consume queue yet
        assert await pr.put_general(store, TOPIC, 0, body, tag, 5) == 0
        assert pr.put_at_once(store, TOPIC, 0, body, tag, 5) is not None
        store.config.timerWheelEnable = False  # the timer hook refuses the record
        assert pr.put_at_once(store, TOPIC, 0, body, tag, 5) is None
        store.config.timerWheelEnable = True
        store.config.brokerRole = BrokerRole.SYNC_MASTER  # the slave wait
        assert pr.put_at_once(store, TOPIC, 0, body, tag, 5) is None
        store.config.brokerRole = BrokerRole.ASYNC_MASTER
        store.running_flags.make_logics_queue_error()
        assert pr.put_at_once(store, TOPIC, 0, body, tag, 5) is None
        assert store.get_max_offset_in_queue(TOPIC, 0) == 2
    finally:
        store.shutdown()


@pytest.mark.timeout(60)
async def test_put_revive_record_waits_for_the_group_commit(tmp_path):
    cfg = _config(tmp_path)
    cfg.flushDiskType = FlushDiskType.SYNC_FLUSH
    store = DefaultMessageStore(cfg, HOST)
    assert store.load()
    store.start()

    class Controller:
        message_store = store

    try:
        ack = AckMsg("T", "g", 0, 1, 2, "b", [1, 3])
        for want in range(3):
            off = await asyncio.wait_for(pr.put_revive_record(Controller, TOPIC, 1, ack), 10)
            assert off == want
            assert store.commit_log.mfq.flushed_where == store.commit_log.get_max_offset()
    finally:
        store.shutdown()


class _Offsets:
    def __init__(self) -> None:
        self.table: dict = {}

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        return self.table.get((group, topic, queue_id), -1)

    def commit_offset(self, _who: str, group: str, topic: str, queue_id: int,
                      offset: int) -> None:
        self.table[(group, topic, queue_id)] = offset


class _Controller:
    """What the revive service asks of a broker, around a real store."""

    def __init__(self, store: DefaultMessageStore) -> None:
        from types import SimpleNamespace

        self.broker_config = SimpleNamespace(brokerClusterName="DefaultCluster",
                                             reviveQueueNum=2)
        self.message_store = store
        self.topic_config_manager = SimpleNamespace(select_topic_config=lambda _t: object())
        self.consumer_offset_manager = _Offsets()


@pytest.mark.timeout(60)
async def test_revive_service_reads_on_past_its_own_records(tmp_path):
    """A record the service wrote as the next one to read moves its read offset
    on (nothing to skip later); one written behind a record not read yet (here
    an ack stored otherwise) is skipped by the read, which applies the other."""
    store = DefaultMessageStore(_config(tmp_path), HOST)
    assert store.load()
    store.start()
    try:
        svc = pr.PopReviveService(_Controller(store))
        svc.ensure_loaded()
        ck1 = PopCheckPoint("T", "g", 1, 10, 1_000, 60_000, [0, 1, 2, 3], "b")
        assert svc.write_now(0, ck1) is None  # no revive queue yet: the general put
        assert await svc.write(0, ck1)
        assert svc.write_now(0, AckMsg("T", "g", 1, 10, 1_000, "b", [10, 11])) is True
        assert svc.read_offsets[0] == 2 and not svc.applied.get(0)
        assert svc.pending[ck1.key()].left == {12, 13}
        body, tag = pr.record_body(AckMsg("T", "g", 1, 10, 1_000, "b", [12, 13]))
        assert await pr.put_general(store, svc.topic, 0, body, tag, 5) == 2  # not the service's
        ck2 = PopCheckPoint("T", "g", 2, 20, 2_000, 60_000, [0], "b")
        assert svc.write_now(0, ck2) is True
        assert svc.read_offsets[0] == 2 and svc.applied[0] == {3}
        assert set(svc.pending) == {ck1.key(), ck2.key()}
        svc.read_all()
        assert svc.read_offsets[0] == 4 and not svc.applied[0]
        assert set(svc.pending) == {ck2.key()}  # the foreign ack settled ck1
        assert svc.c.consumer_offset_manager.query_offset("g", "T", 2) == 21
    finally:
        store.shutdown()


def _bookkeeping_state(svc: pr.PopReviveService) -> tuple:
    def entry(e: pr.Pending) -> tuple:
        return (e.ck, e.revive_qid, e.record_offset, sorted(e.left), e.via_timer)

    return ({k: entry(e) for k, e in svc.pending.items()},
            {q: {k: entry(e) for k, e in m.items()} for q, m in svc.by_queue.items()},
            sorted(svc.heap), svc._seq, dict(svc.read_offsets),
            {q: sorted(s) for q, s in svc.applied.items()},
            dict(svc.c.consumer_offset_manager.table), svc._wake.is_set())


class _OtherService(pr.PopReviveService):
    """A service of another class: the compiled writer reads its fields
    through their attributes, not at PopReviveService's slots."""


@pytest.mark.parametrize("service", [pr.PopReviveService, _OtherService])
def test_record_bookkeeping_compiled_and_twin_leave_the_same_state(service):
    """``written`` / ``add_ck`` / ``apply_ack``: the twins and the compiled
    ones (when built) leave the service in the same state after the same
    records: checkpoints (some twice, some through the timer), acks of some
    of their offsets, acks of none, records ahead of and behind the read
    offset, before and after the first read; the service's fields read at
    their slots or, for another class, through their attributes."""
    import random

    from rmq._fast import compiled_or_none

    impls = [(pr._written, pr._add_ck, pr._apply_ack)]
    c = compiled_or_none("pop_revive")
    if c is not None:
        pr.bind_compiled(c)
        impls.append((c.written, c.add_ck, c.apply_ack))
    states, settled_all = [], []
    for written, add_ck, apply_ack in impls:
        rnd = random.Random(3)
        svc = service(_Controller(None))
        settled: list = []
        svc.on_settled.append(lambda ck, out=settled: out.append(ck.key()))
        svc._next_wake_ms = 1_000_000
        cks: list[PopCheckPoint] = []
        for i in range(600):
            qid = rnd.randrange(2)
            svc.loaded = i > 50
            at = svc.read_offsets.get(qid, 0) + rnd.choice([-1, 0, 0, 0, 1, 2])
            r = rnd.random()
            if r < 0.4 or not cks:
                diffs = sorted(rnd.sample(range(40), rnd.randrange(0, 6)))
                ck = PopCheckPoint(f"T{i % 3}", "g", i % 4, 100 + i, 900_000 + i * 1000,
                                   rnd.choice([1_000, 200_000]), diffs,
                                   rnd.choice(["b", None]))
                cks.append(ck)
                written(svc, qid, ck, at)
            elif r < 0.5:
                add_ck(svc, rnd.choice(cks), qid, at, rnd.random() < 0.5)
            else:
                ck = rnd.choice(cks)
                offs = rnd.sample(ck.offsets(), min(len(ck.offsets()), rnd.randrange(1, 4))) \
                    or [ck.start_offset]
                ack = AckMsg(ck.topic, ck.cid, ck.queue_id, ck.start_offset, ck.pop_time,
                             ck.broker_name if r < 0.95 else "other", offs)
                if r < 0.7:
                    written(svc, qid, ack, at)
                else:
                    apply_ack(svc, ack)
            if i % 97 == 0:
                svc._wake.clear()
        states.append(_bookkeeping_state(svc))
        settled_all.append(settled)
    assert len(states[0][0]) > 20 and len(settled_all[0]) > 20
    assert all(s == states[0] for s in states) and all(s == settled_all[0] for s in settled_all)


def test_merge_keys_compiled_are_the_twins_text():
    """The compiled bookkeeping writes a checkpoint's merge key itself for
    ASCII names and numbers of a long: the keys it files checkpoints under
    and matches acks by are ``merge_key``'s text for those, and for names
    beyond ASCII, negative numbers, numbers past 64 bits, other number
    types and no broker name."""
    from rmq._fast import compiled_or_none

    c = compiled_or_none("pop_revive")
    if c is None:
        pytest.skip("not built")
    pr.bind_compiled(c)
    fields = [("T", "g", 0, 0, 0, "b"), ("Tä", "g", 3, 10, 1_700_000_000_000, "b"),
              ("T", "grüppe", 1, 5, 7, None), ("T", "g", -1, -9, -(1 << 63), "b-ü"), ("T", "g", 1, 1, 1 - (1 << 63), "b"),
              ("T", "g", 2, (1 << 63) - 1, (1 << 63) - 1, ""), ("", "", 0, 1, 1 << 70, None),
              ("T", "g", True, 4, 5, "b"), ("rmq_sys_REVIVE_LOG_x", "CID_a", 7, 123, 456, "br")]
    for topic, group, q, so, pt, bn in fields:
        svc = pr.PopReviveService(_Controller(None))
        ck = PopCheckPoint(topic, group, q, so, pt, 1000, [0, -1], bn)
        c.add_ck(svc, ck, 0, 5)
        assert list(svc.pending) == [ck.key()]
        c.apply_ack(svc, AckMsg(topic, group, q, so, pt, bn, [so, so - 1]))
        assert not svc.pending
    # one field at a time unlike the key before (the last key is given again
    # only for the same names and numbers): texts of the same length, equal
    # texts in other objects, None and the text "None"
    base = ("T1", "g1", 1, 5, 7, "b1")
    svc = pr.PopReviveService(_Controller(None))
    for i, other in [(0, "T2"), (1, "g2"), (2, 2), (3, 6), (4, 8), (5, "b2"), (5, None),
                     (5, "None"), (5, None), (0, "".join(["T", "1"])), (1, "g")]:
        for fields in (base, base[:i] + (other,) + base[i + 1:]):
            ck = PopCheckPoint(*fields[:5], 1000, [0], fields[5])
            c.add_ck(svc, ck, 0, 5)
            assert list(svc.pending) == [ck.key()]
            c.apply_ack(svc, AckMsg(*fields, [fields[3]]))
            assert not svc.pending


@pytest.mark.timeout(60)
async def test_write_now_compiled_and_twin_store_and_apply_the_same(tmp_path):
    """``write_now``, the twin and the compiled one (when built), and
    ``write_ck_now`` / ``write_ack_now`` (records given by their fields,
    twin and compiled): the same records stored (body, tags, property keys,
    queue offsets) and the same service state after the same checkpoints and
    acks (a checkpoint filed from its fields makes the same PopCheckPoint)."""
    from rmq._fast import compiled_or_none

    def by_fields(write_ck_now, write_ack_now):
        """``write_now`` through ``write_ck_now`` / ``write_ack_now``: a
        record given by its fields."""
        def write(svc, qid, rec):
            if isinstance(rec, PopCheckPoint):
                return write_ck_now(svc, qid, rec.topic, rec.cid, rec.queue_id,
                                    rec.start_offset, rec.pop_time, rec.invisible_time,
                                    rec.offsets(), rec.broker_name)
            return write_ack_now(svc, qid, rec.topic, rec.group, rec.queue_id,
                                 rec.start_offset, rec.pop_time, rec.broker_name, rec.offsets)
        return write

    impls = [pr._write_now, by_fields(pr._write_ck_now, pr._write_ack_now)]
    c = compiled_or_none("pop_revive")
    if c is not None:  # (bound here too when the twins are forced)
        pr.bind_compiled(c)
        compiled_or_none("store_put").bind(BrokerRole.SLAVE, FlushDiskType.ASYNC_FLUSH)
        impls += [c.write_now, by_fields(c.write_ck_now, c.write_ack_now)]
    seen = []
    for n, write_now in enumerate(impls):
        store = DefaultMessageStore(_config(tmp_path / str(n)), HOST)
        assert store.load()
        store.start()
        try:
            svc = pr.PopReviveService(_Controller(store))
            settled: list = []
            svc.on_settled.append(settled.append)
            svc.ensure_loaded()
            # (every fifth with an offset below its start offset: a diff below 0)
            cks = [PopCheckPoint(f"T{i % 3}", "g", i % 4, 100 + i, 1_000 + i, 60_000,
                                 list(range(0, 1 + i % 32, 1 + i % 2)) + [-3] * (i % 5 == 0),
                                 "b") for i in range(40)]
            assert await svc.write(0, cks[0]) and await svc.write(1, cks[1])
            got = []
            for i, ck in enumerate(cks[2:], 2):
                got.append(write_now(svc, i % 2, ck))
                # (every fourth acks all its offsets in order: a batch ack of the pop)
                offs = ck.offsets() if i % 4 == 1 else ck.offsets()[: 1 + i % 3]
                if i % 7 == 0:  # an offset no checkpoint holds, past 64 bits signed
                    offs.append(2**63)
                got.append(write_now(svc, i % 2, AckMsg(ck.topic, ck.cid, ck.queue_id,
                                                        ck.start_offset, ck.pop_time,
                                                        ck.broker_name, offs)))
            assert got == [True] * len(got)
            records = []
            for qid in (0, 1):
                for off in range(store.get_max_offset_in_queue(svc.topic, qid)):
                    phy = store.consume_queue_table[svc.topic][qid].read_entry(off)[0]
                    m = store.look_message_by_offset(phy)
                    records.append((qid, m.queue_offset, m.body, m.properties["TAGS"],
                                    sorted(m.properties)))
            seen.append((records, _bookkeeping_state(svc), settled))
        finally:
            store.shutdown()
    assert len(seen[0][0]) == 2 + 38 * 2 and len(seen[0][2]) > 2
    assert all(s == seen[0] for s in seen)


def test_pending_checkpoints_compiled_and_twin_cross_off_alike():
    """``Pending``, the twin and the compiled one (when built): the same
    offsets left, unacked (in the checkpoint's order) and the same answer to
    each ``ack`` for checkpoints whose offsets run on, rise with gaps, or come
    in any order with repeats; acks of offsets not there, of other number
    types and beyond 64 bits; offsets out of a long's range refused alike."""
    import random

    from rmq._fast import compiled_or_none

    types = [pr._Pending]
    c = compiled_or_none("pop_revive")
    if c is not None:
        types.append(c.Pending)
    rnd = random.Random(7)
    cases = []
    for i in range(400):
        shape = i % 3
        n = rnd.randrange(0, 34)
        if shape == 0:
            diffs = list(range(n))
        elif shape == 1:
            diffs = sorted(rnd.sample(range(80), n))
        else:
            diffs = [rnd.randrange(-3, 40) for _ in range(n)]
        so = rnd.choice([0, 5, 1 << 40])
        acks = []
        for _ in range(rnd.randrange(1, 6)):
            mine = [so + d for d in diffs]
            offs = rnd.sample(mine, rnd.randrange(0, len(mine) + 1)) + \
                [so + rnd.randrange(-5, 85) for _ in range(rnd.randrange(0, 4))]
            if rnd.random() < 0.1:
                offs += [True, float(so + 1), 1 << 70, -(1 << 70)]
            acks.append(offs)
        cases.append((PopCheckPoint("T", "g", 1, so, 1_000, 60_000, diffs, "b"), acks,
                      i % 2 == 0))
    seen = []
    for t in types:
        got = []
        for ck, acks, via_timer in cases:
            e = t(ck, 3, 17, via_timer)
            got.append((e.ck, e.revive_qid, e.record_offset, e.via_timer, sorted(e.left),
                        e.unacked()))
            for offs in acks:
                got.append((e.ack(offs), sorted(e.left), e.unacked()))
        for so, diffs in (((1 << 63) - 2, [0, 1, 2]), (-(1 << 63), [-1]), (1 << 64, [0]),
                          (0, [1 << 63])):
            with pytest.raises(ValueError):
                t(PopCheckPoint("T", "g", 1, so, 1, 1, diffs, "b"), 0, 0)
        seen.append(got)
    assert sum(1 for g in seen[0] if g[0] is True) > 100
    assert all(s == seen[0] for s in seen)
