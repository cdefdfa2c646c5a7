"""The compiled send lane opens and closes a read's append session itself
(``SendLane.open_read`` / ``close_read``, the calls of
``SendLaneSupport.begin`` / ``end`` inlined): it takes and declines a read
when the twin does, holds no lock after either, and publishes, counts and
notifies what the twin does.  Both lanes serve the same broker in turn."""

from __future__ import annotations

import shutil
import struct
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import MemberDescriptorType
from typing import Any

import pytest

from bench.lane_reads import QUEUES, TOPIC, _Channel, _controller, _shutdown
from bench.raw import RawRequests
from rmq._fast import compiled, compiled_or_none
from rmq.broker import send_lane
from rmq.broker.stats import BrokerStats
from rmq.broker.topic_config_manager import TopicConfigManager
from rmq.common.topic_config import TopicConfig
from rmq.store import BrokerRole
from rmq.store.commit_log import CommitLog
from rmq.store.default_message_store import DefaultMessageStore
from rmq.store.index import IndexFile, IndexService
from rmq.store.message import MessageExtBrokerInner
from rmq.store.multi_dispatch import MultiDispatch
from rmq.store.running_flags import DISK_FULL_BIT
from rmq.testing.wait import wait_until

FAST = compiled_or_none("send_lane")
MAX_FRAME = 16 * 1024 * 1024


def _locks_free(controller: Any) -> bool:
    cl = controller.message_store.commit_log
    locks = (cl.put_lock, controller.message_store._reput_lock)
    for lock in locks:
        if not lock.acquire(blocking=False):
            return False
        lock.release()
    return True


def _declines(controller: Any) -> list[tuple[str, Callable[[], Any], Callable[[], Any]]]:
    """(name, make the broker refuse lane sends, undo it)."""
    bc = controller.broker_config
    store = controller.message_store
    cfg = store.config
    queue = controller.send_lane_support.send_queue
    flags = store.running_flags
    ix = store.index_service

    def setter(obj: Any, name: str, value: Any) -> tuple[Callable[[], Any], Callable[[], Any]]:
        old = getattr(obj, name)
        return (lambda: setattr(obj, name, value)), (lambda: setattr(obj, name, old))

    return [
        ("permission", *setter(bc, "brokerPermission", 4)),
        ("start delay", *setter(bc, "startAcceptSendRequestTimeStamp", 1)),
        ("slave", *setter(cfg, "brokerRole", BrokerRole.SLAVE)),
        ("sync master", *setter(cfg, "brokerRole", BrokerRole.SYNC_MASTER)),
        ("disk full", lambda: setattr(flags, "flag_bits", flags.flag_bits | DISK_FULL_BIT),
         lambda: setattr(flags, "flag_bits", flags.flag_bits & ~DISK_FULL_BIT)),
        ("pool busy", *setter(queue, "busy", queue.workers)),
        ("put delay", *setter(queue, "before_run_active", lambda: True)),
        ("put in lock", *setter(store.commit_log, "begin_time_in_lock", 1)),
        ("non-ascii cluster", *setter(controller.send_lane_support.processor, "cluster", "é")),
        ("index keys unfinished", *setter(ix, "_unfinished", object())),
        ("shut down", *setter(store, "_shutdown", True)),
    ]


def _snapshot(controller: Any) -> tuple:
    store = controller.message_store
    stats = controller.stats
    return (controller.send_lane_support.served, store.stats.put_message_times_total,
            store.stats.put_message_size_total, stats.put_total,
            store.stats.topic_put_nums.get(TOPIC, 0), store.stats.topic_put_size.get(TOPIC, 0),
            store.stats.put_latency[0],
            store.reput_from_offset == store.commit_log.get_max_offset())


@pytest.mark.compiled_only
async def test_compiled_lane_opens_and_closes_reads_as_the_twin() -> None:
    assert FAST is not None, "rmq._fast.send_lane is not built"
    root = Path(tempfile.mkdtemp(prefix="lane-bracket-"))
    controller = await _controller(root)
    try:
        support = controller.send_lane_support
        lanes = {"compiled": FAST.SendLane(support, MAX_FRAME),
                 "twin": send_lane.SendLane(support, MAX_FRAME)}
        raw = RawRequests(TOPIC, b"x" * 1024, queues=QUEUES)
        channel = _Channel()
        heard: list[int] = []
        controller.add_arrival_listener(lambda *a: None, lambda runs: heard.append(len(runs)))
        n = 0

        def read(frames: int) -> bytes:
            nonlocal n
            buf = bytearray()
            for _ in range(frames):
                buf += raw.frame(n)[1]
                n += 1
            return bytes(buf)

        for name, apply, undo in _declines(controller):
            apply()
            try:
                for way, lane in lanes.items():
                    buf = read(2)
                    assert lane.serve(channel, buf, 0, len(buf)) == (0, None), (name, way)
                    assert _locks_free(controller), (name, way)
            finally:
                undo()
        # topics the lane never stores into, though they exist; a queue past both counts
        topics = controller.topic_config_manager
        for topic in ("%RETRY%G", "RMQ_SYS_TRANS_HALF_TOPIC", "SCHEDULE_TOPIC_XXXX"):
            topics.update_topic_config(TopicConfig(topic, QUEUES, QUEUES))
            other = RawRequests(topic, b"x" * 1024, queues=QUEUES)
            for way, lane in lanes.items():
                buf = bytes(other.frame(1)[1])
                assert lane.serve(channel, buf, 0, len(buf)) == (0, None), (topic, way)
                assert _locks_free(controller), (topic, way)
        topics.update_topic_config(TopicConfig(TOPIC, 2, 2))
        for way, lane in lanes.items():
            buf = bytes(raw.frame(3)[1])  # queue 3 of a topic now of 2
            assert lane.serve(channel, buf, 0, len(buf)) == (0, None), way
        topics.update_topic_config(TopicConfig(TOPIC, QUEUES, QUEUES))
        deltas = {}
        for frames in (1, 6, 11):
            for way, lane in lanes.items():
                before = _snapshot(controller)
                heard.clear()
                buf = read(frames)
                pos, out = lane.serve(channel, buf, 0, len(buf))
                assert pos == len(buf), way
                assert _locks_free(controller), way
                after = _snapshot(controller)
                deltas[way] = (out.count(b'"code":0'), heard[:],
                               *(a - b for a, b in zip(after[:7], before[:7], strict=True)),
                               after[7])
            assert deltas["compiled"] == deltas["twin"], frames
            assert deltas["twin"][:3] == (frames, [min(frames, QUEUES)], frames)
            # the store's statistics: messages, of the topic, and puts (one per send)
            assert deltas["twin"][3] == deltas["twin"][6] == deltas["twin"][8] == frames
    finally:
        await _shutdown(controller)
        shutil.rmtree(root, ignore_errors=True)


class _Holder:
    """A listener's holder that slots its waiting field (as the broker's do)."""

    __slots__ = ("table",)

    def __init__(self) -> None:
        self.table: dict = {}


@pytest.mark.compiled_only
@pytest.mark.timeout(60)
async def test_compiled_lane_tells_the_broker_listeners_as_the_twin() -> None:
    """The broker's own runs listener (``counted_runs_listener``, which the
    compiled lane walks in C and whose runs it makes only when a listener
    would hear them): listeners behind a waiting holder (slotted or not),
    behind topics, and a held pull's queue (its puts listed) hear what they
    hear from the twin, and the statistics count the same, for reads of one
    topic and of two."""
    assert FAST is not None, "rmq._fast.send_lane is not built"
    root = Path(tempfile.mkdtemp(prefix="lane-forms-"))
    controller = await _controller(root)
    try:
        support = controller.send_lane_support
        assert controller.counted_runs_listener.func is compiled("lane_runs").on_counted_runs
        lanes = {"compiled": FAST.SendLane(support, MAX_FRAME),
                 "twin": send_lane.SendLane(support, MAX_FRAME)}
        other = "LaneFormsOther"
        controller.topic_config_manager.update_topic_config(TopicConfig(other, QUEUES, QUEUES))
        store = controller.message_store
        for q in range(QUEUES):  # (its consume queues made by a general put each)
            msg = MessageExtBrokerInner(other, q, 0, b"general", {}, "", 0, 0, 1,
                                        ("10.0.0.1", 5000), ("10.0.0.2", 10911), 0, 0)
            assert store.put_message(msg).is_ok()
        await wait_until(lambda: store.reput_from_offset == store.commit_log.get_max_offset(),
                         10, 0.01, "the general puts dispatched")
        raws = {TOPIC: RawRequests(TOPIC, b"x" * 512, queues=QUEUES),
                other: RawRequests(other, b"y" * 256, queues=QUEUES)}
        channel = _Channel()
        heard: list[tuple] = []
        slotted, plain = _Holder(), type("Plain", (), {"table": {}})()
        for name, holder in (("slotted", slotted), ("plain", plain)):
            controller.add_arrival_listener(
                lambda *a: None, lambda runs, name=name: heard.append((name, list(runs))),
                waiting=(holder, "table"))
        controller.add_arrival_listener(
            lambda *a: None, lambda runs: heard.append(("topics", list(runs))),
            topics=frozenset((other,)))
        hold = controller.pull_request_hold_service
        n = 0

        def read(*topics: str) -> bytes:
            nonlocal n
            buf = bytearray()
            for topic in topics:
                buf += raws[topic].frame(n)[1]
                n += 1
            return bytes(buf)

        stages = [
            ("nobody waits", lambda: None),
            ("slotted waits", lambda: slotted.table.update(x=1)),
            ("plain waits", lambda: (slotted.table.clear(), plain.table.update(x=1))),
            ("a pull held", lambda: (plain.table.clear(),
                                     hold.table.setdefault((TOPIC, 1), []))),
        ]
        for stage, apply in stages:
            apply()
            for shape in ((TOPIC,), (TOPIC, TOPIC, TOPIC), (TOPIC, other, TOPIC), (other,)):
                got = {}
                for way, lane in lanes.items():
                    heard.clear()
                    before = _snapshot(controller)
                    buf = read(*shape)
                    pos, _out = lane.serve(channel, buf, 0, len(buf))
                    assert pos == len(buf), (stage, shape, way)
                    after = _snapshot(controller)
                    runs = [(who, [(r[0], r[5], r[7], r[8] is not None) for r in rs])
                            for who, rs in heard]
                    got[way] = (runs, *(a - b for a, b in zip(after[:7], before[:7],
                                                              strict=True)),
                                controller.message_store.stats.topic_put_nums.get(other))
                assert got["compiled"][0] == got["twin"][0], (stage, shape)
                assert got["compiled"][1:-1] == got["twin"][1:-1], (stage, shape)
                whom = {who for who, _runs in got["twin"][0]}
                if stage == "nobody waits":
                    assert whom == ({"topics"} if other in shape else set()), shape
                elif stage in ("slotted waits", "plain waits"):
                    assert stage.split()[0] in whom, (stage, shape)
        hold.table.pop((TOPIC, 1), None)
    finally:
        await _shutdown(controller)
        shutil.rmtree(root, ignore_errors=True)


def _queue_puts(stats: Any) -> dict[str, tuple[int, int, int]]:
    """QUEUE_PUT_NUMS / _SIZE of the bench topic's queues after a fold: (sum, times, bytes)."""
    out = {}
    for q in range(QUEUES):
        key = f"{TOPIC}@{q}"
        nums = stats.get_stats_item("QUEUE_PUT_NUMS", key)
        if nums is not None:
            size = stats.get_stats_item("QUEUE_PUT_SIZE", key)
            out[key] = (nums.snapshot(60)["sum"], nums.times(60), size.snapshot(60)["sum"])
    return out


@pytest.mark.timeout(60)
async def test_lane_counts_the_broker_puts_until_the_fold() -> None:
    """A served read adds to ``put_total`` at once and keeps its queues' put
    counts (compiled: C counters on the queues; twin: the support's table)
    until the broker's statistics fold them; the items then show what the
    general path's counting shows, with either lane."""
    root = Path(tempfile.mkdtemp(prefix="lane-counts-"))
    controller = await _controller(root)
    try:
        support = controller.send_lane_support
        stats = controller.stats
        lanes = [send_lane.SendLane(support, MAX_FRAME)]
        fast = compiled("send_lane")  # (None in the twins' pass)
        if fast is not None:
            lanes.append(fast.SendLane(support, MAX_FRAME))
        raw = RawRequests(TOPIC, b"x" * 1024, queues=QUEUES)
        channel = _Channel()
        stats.fold()
        before = _queue_puts(stats)
        n = 0
        for lane in lanes:
            for frames in (6, 11, 7):
                buf = bytearray()
                for _ in range(frames):
                    buf += raw.frame(n)[1]
                    n += 1
                total = stats.put_total
                pos, _out = lane.serve(channel, bytes(buf), 0, len(buf))
                assert pos == len(buf)
                assert stats.put_total == total + frames
                assert not stats._put_pending  # kept by the lane until the fold
        after = _queue_puts(stats)
        added = {k: tuple(a - b for a, b in zip(v, before.get(k, (0, 0, 0)), strict=True))
                 for k, v in after.items()}
        served = n // QUEUES  # every queue got as many (n is a multiple of QUEUES)
        assert n % QUEUES == 0
        assert {k: v[:2] for k, v in added.items()} == {
            f"{TOPIC}@{q}": (served, served) for q in range(QUEUES)}
        sizes = {v[2] for v in added.values()}
        assert len(sizes) == 1 and sizes.pop() > served * 1024
        assert stats.get_stats_item("TOPIC_PUT_NUMS", TOPIC).snapshot(60)["sum"] == \
            sum(v[0] for v in after.values())
        stats.fold()  # nothing left to hand over
        assert _queue_puts(stats) == after
    finally:
        await _shutdown(controller)
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.compiled_only
@pytest.mark.timeout(60)
async def test_compiled_lane_appends_after_a_general_put_between_its_reads() -> None:
    """The compiled lane keeps a queue's tail between its reads while nothing
    else stored; a general put into that queue between two reads moves it,
    and the next read appends after that put, not over it."""
    assert FAST is not None, "rmq._fast.send_lane is not built"
    root = Path(tempfile.mkdtemp(prefix="lane-general-"))
    controller = await _controller(root)
    try:
        store = controller.message_store
        cl = store.commit_log
        lane = FAST.SendLane(controller.send_lane_support, MAX_FRAME)
        raw = RawRequests(TOPIC, b"x" * 1024, queues=QUEUES)
        channel = _Channel()
        key = (TOPIC, 0)
        first = cl.topic_queue_table[key]

        def serve(n: int) -> None:  # frame n goes to queue n % QUEUES
            buf = bytes(raw.frame(n)[1])
            assert lane.serve(channel, buf, 0, len(buf))[0] == len(buf)

        def dispatched() -> bool:
            return store.reput_from_offset == cl.get_max_offset()

        serve(0)
        serve(QUEUES)  # the tail as the lane left it
        msg = MessageExtBrokerInner(TOPIC, 0, 0, b"general", {}, "", 0, 0, 1,
                                    ("10.0.0.1", 5000), ("10.0.0.2", 10911), 0, 0)
        assert store.put_message(msg).is_ok()
        await wait_until(dispatched, 10, 0.01, "the general put dispatched")
        serve(2 * QUEUES)
        serve(3 * QUEUES)
        assert cl.topic_queue_table[key] == first + 5
        cq = store.consume_queue_table[TOPIC][0]
        bodies = []
        for offset in range(first, first + 5):
            buf, _ = cq.get_index_buffer(offset)
            phy, _size, _tags = struct.unpack_from(">qiq", buf, 0)
            found = store.look_message_by_offset(phy)
            assert found.queue_offset == offset
            bodies.append(bytes(found.body))
        assert bodies[2] == b"general" and bodies.count(b"x" * 1024) == 4
        assert cq.get_max_offset_in_queue() == first + 5
    finally:
        await _shutdown(controller)
        shutil.rmtree(root, ignore_errors=True)


def test_the_store_fields_the_lane_reads_are_slots() -> None:
    """The compiled lane reads these fields at their slots (an attribute
    read, ~140 instructions, for a field that is not one): each is a plain
    slot of its class, the instance dict kept for the rest."""
    fields = {
        CommitLog: ("begin_time_in_lock", "append_run", "zero_ahead_enabled",
                    "topic_queue_table", "mfq", "file_size", "store_host_field",
                    "msg_id_prefix", "multi"),
        IndexService: ("_unfinished", "files", "_spare", "max_slots", "max_index"),
        DefaultMessageStore: ("_shutdown", "reput_from_offset", "consume_queue_table",
                              "checkpoint", "commit_service", "message_runs_listener",
                              "index_service"),
    }
    for cls, names in fields.items():
        assert cls.__dictoffset__, cls  # (the instance dict kept)
        for name in names:
            assert type(cls.__dict__.get(name)) is MemberDescriptorType, (cls, name)


def test_the_broker_fields_the_lane_reads_every_read_are_slots() -> None:
    """The same for the fields of the broker and the index files the
    compiled lane's per-read bracket reads (``open_read``, ``fill``,
    ``close_read``)."""
    fields = {
        send_lane.SendLaneSupport: ("served", "_tails_of", "_tail_pair"),
        TopicConfigManager: ("table",),
        BrokerStats: ("size_histograms",),
        IndexFile: ("mf", "max_index"),
        MultiDispatch: ("enabled",),
    }
    for cls, names in fields.items():
        for name in names:
            assert type(cls.__dict__.get(name)) is MemberDescriptorType, (cls, name)


async def test_a_dledger_leaders_lane_leads_as_the_twin() -> None:
    """``leads`` (the DLedger lane's check before it stores a read): the
    compiled lane says what the twin says, True while the broker leads its
    group of one and takes sends, False for each reason to decline -- the
    general ones, an ASYNC_MASTER's role, a follower's, a leader handing
    over."""
    root = Path(tempfile.mkdtemp(prefix="lane-leads-"))
    controller = await _controller(root, dledger=True)
    try:
        support = controller.send_lane_support
        lanes = [send_lane.SendLane(support, MAX_FRAME)]
        if FAST is not None:
            lanes.append(FAST.SendLane(support, MAX_FRAME))
        await wait_until(lambda: lanes[0].leads(), 30, 0.02, "the group's leadership")
        assert [lane.leads() for lane in lanes] == [True] * len(lanes)
        ms = support.cl.server.member_state

        def setter(obj: Any, name: str, value: Any) -> tuple[Callable[[], Any],
                                                              Callable[[], Any]]:
            old = getattr(obj, name)
            return (lambda: setattr(obj, name, value)), (lambda: setattr(obj, name, old))

        declines = [d for d in _declines(controller)
                    if d[0] not in ("sync master", "index keys unfinished")]
        declines += [("async master", *setter(support.cfg, "brokerRole",
                                              BrokerRole.ASYNC_MASTER)),
                     ("follower", *setter(ms, "role", type(ms.role).FOLLOWER)),
                     ("handing over", *setter(ms, "transferee", "n1"))]
        for name, apply, undo in declines:
            apply()
            try:
                assert [lane.leads() for lane in lanes] == [False] * len(lanes), name
            finally:
                undo()
            assert [lane.leads() for lane in lanes] == [True] * len(lanes), name
    finally:
        await _shutdown(controller)
        shutil.rmtree(root, ignore_errors=True)
