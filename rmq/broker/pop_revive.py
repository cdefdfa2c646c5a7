"""PopReviveService: brings popped and unacknowledged messages back.

Every pop writes a checkpoint (ck) to one of the ``reviveQueueNum`` queues of
the revive topic, every ack an ack record to the same queue (see
``rmq.broker.pop_records``).  This service keeps the checkpoints not yet
settled in memory, ordered by revive time (popTime + invisibleTime), crosses
off the offsets their acks name, and when a checkpoint's revive time comes
re-puts its unacknowledged messages into the group's pop retry topic with
reconsume times + 1 (the DLQ once the group's retryMaxTimes is reached).  The
records this broker writes are applied as they are stored (``write``); the
queues are read back in order after a restart, and once a second for anything
written otherwise (what was applied is skipped).

Differences from 5.3.3 (docs/COMPATIBILITY.md): cks are plain records read at
once, not timer messages due at reviveTime - 1 s, and a ck is revived when
its time comes (5.3.3 waits for a scan 2 s past it), so messages come back
within tens of milliseconds of their invisible time.  After a revive the
service writes a batch ack for the offsets it re-put ("settled"), so that a
replay after a crash does not revive them again.

Durability: the revive offset of each queue (group ``CID_RMQ_SYS_REVIVE_GROUP``
in consumerOffset.json, as 5.3.3 keeps it: the last record done with, read
on from the next) is one before the revive-queue offset of its oldest
unsettled ck.  After a SIGKILL the service re-reads from there: cks are
rebuilt with their acks, the group's consume offsets are moved past every
popped message (a pop's offset commit may not have been flushed), and
checkpoints past their time are revived at once.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import struct
import time
from typing import Any

from rmq._fast import compiled
from rmq.broker.pop_records import (
    ACK_TAG,
    BATCH_ACK_TAG,
    CK_TAG,
    PROPERTY_FIRST_POP_TIME,
    REVIVE_GROUP,
    AckMsg,
    PopCheckPoint,
    normal_topic,
    retry_topic_v1,
    retry_topic_v2,
    revive_topic,
)
from rmq.common import message as mc
from rmq.common import topics as T
from rmq.common.logging import BROKER_LOGGER_NAME
from rmq.common.message_id import create_message_id
from rmq.common.timer import PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_OUT_MS
from rmq.store import BrokerRole, FlushDiskType, MessageExtBrokerInner, PutMessageStatus
from rmq.store.message_codec import decode_message, message_properties_to_string
from rmq.store.single_put import put_single, wait_flush

log = logging.getLogger(BROKER_LOGGER_NAME)

READ_BATCH = 32
PUT_OK = PutMessageStatus.PUT_OK
IDLE_WAKE_S = 1.0  # re-read the queues at least this often
# a ck that came through the timer (5.3.3 wrote it) has its acks come through the
# timer too, due at its revive time: it waits 5.3.3's ackTimeInterval + 1 s
TIMER_ACK_GRACE_MS = 2000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


_I64_MIN = -(1 << 63)
_I64_MAX = (1 << 63) - 1


class _Pending:
    """An unsettled checkpoint: its record's place and the offsets not acked
    yet.  ``ack`` crosses offsets off and tells when none is left: the check
    for the last one is a set's emptiness, not a walk of the checkpoint's
    offsets per ack.  The compiled twin (``rmq._fast.pop_revive.Pending``)
    keeps the offsets in a C array with a flag each, so a pop's checkpoint
    and its ack make no set and no integer per message."""

    __slots__ = ("ck", "revive_qid", "record_offset", "via_timer", "_left")

    def __init__(self, ck: PopCheckPoint, revive_qid: int, record_offset: int,
                 via_timer: bool = False) -> None:
        so = ck.start_offset
        left = set()
        for d in ck.offset_diffs:
            o = so + d
            if not _I64_MIN <= o <= _I64_MAX:  # a long in 5.3.3, and in the C twin
                raise ValueError(f"checkpoint offset {o} out of range")
            left.add(o)
        self.ck = ck
        self.revive_qid = revive_qid
        self.record_offset = record_offset  # the ck record's offset in its revive queue
        self.via_timer = via_timer  # written by 5.3.3: its acks arrive through the timer
        self._left = left

    @property
    def left(self) -> set[int]:
        """The offsets not acked yet."""
        return set(self._left)

    def ack(self, offsets: list[int]) -> bool:
        """Cross ``offsets`` off (any not among the checkpoint's: ignored);
        True once none of the checkpoint's is left."""
        left = self._left
        left.difference_update(offsets)
        return not left

    def unacked(self) -> list[int]:
        """The offsets not acked, in the checkpoint's order."""
        left = self._left
        return [o for o in self.ck.offsets() if o in left]


_I32 = struct.Struct(">i")
_H16 = struct.Struct(">h")


def body_and_properties(buf: memoryview) -> tuple[bytes, bytes]:
    """The body and the properties text of a stored record, without decoding
    the rest (the revive queues hold many small records)."""
    (sys_flag,) = _I32.unpack_from(buf, 36)
    p = 48 + (20 if sys_flag & 0x10 else 8) + 8 + (20 if sys_flag & 0x20 else 8) + 12
    (body_len,) = _I32.unpack_from(buf, p)
    p += 4
    body = bytes(buf[p:p + body_len])
    p += body_len
    p += 1 + buf[p]
    (props_len,) = _H16.unpack_from(buf, p)
    return body, bytes(buf[p + 2:p + 2 + props_len])


def _tag(props: bytes) -> str | None:
    for kv in props.split(b"\x02"):
        if kv.startswith(b"TAGS\x01"):
            return kv[5:].decode()
    return None


def _came_through_timer(props: bytes) -> bool:
    """A record the timer delivered (TIMER_OUT_MS set): 5.3.3 writes its
    records so, rmq's are stored at once."""
    return any(kv.startswith(_TIMER_OUT_KEY) for kv in props.split(b"\x02"))


_TIMER_OUT_KEY = PROPERTY_TIMER_OUT_MS.encode() + b"\x01"


class PopReviveService:
    # the fields each pop's and each ack's record reads and sets slotted: the
    # compiled writer (rmq._fast.pop_revive) reads them at their slots; the
    # rest in the dict, where a test may also set a method of its own
    __slots__ = ("c", "store", "topic", "read_offsets", "pending", "by_queue", "heap", "_seq",
                 "_wake", "applied", "_next_wake_ms", "loaded", "on_settled", "__dict__",
                 "__weakref__")

    def __init__(self, controller: Any) -> None:
        self.c = controller
        self.bc = controller.broker_config
        self.store = controller.message_store
        self.topic = revive_topic(self.bc.brokerClusterName)
        self.queue_num = max(1, self.bc.reviveQueueNum)
        self.read_offsets: dict[int, int] = {}
        self.pending: dict[str, Pending] = {}
        self.by_queue: dict[int, dict[str, Pending]] = {q: {} for q in range(self.queue_num)}
        self.heap: list[tuple[int, int, str]] = []
        self._seq = 0
        self._wake = asyncio.Event()
        self.applied: dict[int, set[int]] = {}  # records applied when written, not read yet
        self._next_wake_ms = 0
        self._task: asyncio.Task | None = None
        self.loaded = False
        self.revived = 0  # messages re-put (metrics)
        self.on_settled: list[Any] = []  # callbacks(ck): in-flight accounting

    # ---- life cycle ------------------------------------------------------------
    def ensure_topic(self) -> None:
        tcm = self.c.topic_config_manager
        if tcm.select_topic_config(self.topic) is None:
            tcm.create_topic_in_send_message_back_method(
                self.topic, self.queue_num, mc.PERM_READ | mc.PERM_WRITE, 0)

    async def start(self) -> None:
        self.ensure_loaded()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="popRevive")

    def ensure_loaded(self) -> None:
        """The revive queues read up to their end once (after a restart this
        moves the groups' offsets past what was popped before the crash): a pop
        calls it first, as it may come before this service has started."""
        if self.loaded:
            return
        if not self.read_offsets:
            self.ensure_topic()
            for qid in range(self.queue_num):
                # 5.3.3 keeps the offset of the last record it is done with
                off = self.c.consumer_offset_manager.query_offset(REVIVE_GROUP, self.topic, qid)
                self.read_offsets[qid] = off + 1 if off >= 0 else 0
        self.read_all()
        self.loaded = True

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        self.commit_revive_offsets()

    async def write(self, qid: int, record: PopCheckPoint | AckMsg) -> bool:
        """Store a ck or ack record and apply it at once: this broker writes
        every record of its revive queues, so the queues are read back only
        after a restart (and once a second for safety; what was applied here is
        skipped there)."""
        offset = await put_revive_record(self.c, self.topic, qid, record)
        if offset is None:
            return False
        written(self, qid, record, offset)
        return True

    def write_now(self, qid: int, record: PopCheckPoint | AckMsg) -> bool | None:
        """``write`` without a coroutine, for a record the store takes at once
        (``put_at_once`` under ASYNC_FLUSH): True once stored and applied;
        None with nothing done when ``write`` must store it (the general put,
        or a group commit to wait for).  A pop and an ack call it first: a
        coroutine less for each of their records."""
        store = self.store
        if store.config.flushDiskType is FlushDiskType.SYNC_FLUSH:
            return None
        body, tag = record_body(record)
        put = put_at_once(store, self.topic, qid, body, tag, now_ms())
        if put is None:
            return None
        written(self, qid, record, put[0])
        return True

    def write_ck_now(self, qid: int, topic: str, cid: str, queue_id: int, start_offset: int,
                     pop_time: int, invisible: int, offsets: list[int],
                     broker_name: str | None) -> bool | None:
        """``write_now`` of a pop's checkpoint of ``offsets`` given by its
        fields.  The compiled twin (``rmq._fast.pop_revive.write_ck_now``)
        writes its body from them and files the pending entry without
        making the PopCheckPoint (the entry makes it when asked for)."""
        return self.write_now(qid, PopCheckPoint(topic, cid, queue_id, start_offset, pop_time,
                                                 invisible, [o - start_offset for o in offsets],
                                                 broker_name))

    def write_ack_now(self, qid: int, topic: str, group: str, queue_id: int,
                      start_offset: int, pop_time: int, broker_name: str | None,
                      offsets: list[int]) -> bool | None:
        """``write_now`` of an ack record given by its fields (the compiled
        twin makes no AckMsg)."""
        return self.write_now(qid, AckMsg(topic, group, queue_id, start_offset, pop_time,
                                          broker_name, offsets))

    def wake(self) -> None:
        self._wake.set()

    async def _run(self) -> None:
        last_read = 0.0
        while True:
            try:
                if time.monotonic() - last_read >= IDLE_WAKE_S:
                    self.read_all()
                    last_read = time.monotonic()
                await self.revive_due()
                self.commit_revive_offsets()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("PopReviveService round failed")
            timeout = max(0.0, IDLE_WAKE_S - (time.monotonic() - last_read))
            if self.heap:
                timeout = min(timeout, max(0.0, (self.heap[0][0] - now_ms()) / 1000))
            self._next_wake_ms = now_ms() + int(timeout * 1000)
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                pass

    # ---- reading the revive queues ----------------------------------------------------
    def read_all(self) -> None:
        for qid in range(self.queue_num):
            self.read_queue(qid)

    def read_queue(self, qid: int) -> None:
        offset = self.read_offsets.get(qid, 0)
        while True:
            result = self.store.get_message(REVIVE_GROUP, self.topic, qid, offset, READ_BATCH)
            if result is None:
                return
            try:
                if result.status.name != "FOUND":
                    if result.next_begin_offset != offset and result.next_begin_offset >= 0:
                        # past a removed stretch, or back to the end of a queue that
                        # is shorter than the kept offset (a store replaced)
                        offset = result.next_begin_offset
                        self.read_offsets[qid] = offset
                        continue
                    return
                applied = self.applied.get(qid)
                for buf, at in zip(result.message_buffers, result.message_queue_offsets,
                                   strict=True):
                    if applied and at in applied:
                        applied.discard(at)  # applied when it was written
                        continue
                    self._apply(qid, at, buf)
                offset = result.next_begin_offset
                self.read_offsets[qid] = offset
            finally:
                result.release()

    def _apply(self, qid: int, record_offset: int, buf: memoryview) -> None:
        try:
            body, props = body_and_properties(buf)
            tag = _tag(props)
            if tag == CK_TAG:
                self.add_ck(PopCheckPoint.decode(body), qid, record_offset,
                            _came_through_timer(props))
            elif tag in (ACK_TAG, BATCH_ACK_TAG):
                self.apply_ack(AckMsg.decode(body))
        except (ValueError, KeyError, TypeError, struct.error):
            log.warning("skip a bad revive record at %s:%d:%d", self.topic, qid, record_offset)

    def add_ck(self, ck: PopCheckPoint, qid: int, record_offset: int,
               via_timer: bool = False) -> None:
        """A checkpoint pending: in the map, its queue's map and the heap; the
        group's offset past its messages (``add_ck``)."""
        add_ck(self, ck, qid, record_offset, via_timer)

    def apply_ack(self, ack: AckMsg) -> None:
        """Offsets of a pending checkpoint acked (``apply_ack``)."""
        apply_ack(self, ack)

    def _settle(self, key: str) -> None:
        entry = self.pending.pop(key, None)
        if entry is None:
            return
        self.by_queue.get(entry.revive_qid, {}).pop(key, None)
        for cb in self.on_settled:
            cb(entry.ck)

    def is_pending(self, key: str) -> bool:
        return key in self.pending

    def inflight_by_group(self) -> dict[tuple[str, str], int]:
        """Popped and not acknowledged messages per (group, topic)."""
        out: dict[tuple[str, str], int] = {}
        for entry in self.pending.values():
            ck = entry.ck
            k = (ck.cid, normal_topic(ck.topic, ck.cid))
            out[k] = out.get(k, 0) + len(entry.unacked())
        return out

    # ---- reviving ----------------------------------------------------------------
    async def revive_due(self) -> None:
        if self.c.is_slave():
            return  # a master's job, as in 5.3.3
        now = now_ms()
        while self.heap and self.heap[0][0] <= now:
            _, _, key = heapq.heappop(self.heap)
            entry = self.pending.get(key)
            if entry is not None and entry.via_timer:
                if not self._timer_passed(entry.ck.revive_time):
                    self._seq += 1
                    heapq.heappush(self.heap, (now + 500, self._seq, key))
                    continue
                self.read_queue(entry.revive_qid)  # the acks the timer put there since
                entry = self.pending.get(key)
            if entry is None:
                continue
            unacked = entry.unacked()
            if unacked:
                ok = await self.revive(entry.ck, unacked)
                if not ok:  # the store refused: try again shortly
                    self._seq += 1
                    heapq.heappush(self.heap, (now + 1000, self._seq, key))
                    return
                await self._write_settled(entry, unacked)
            self._settle(key)

    def _timer_passed(self, time_ms: int) -> bool:
        """The timer has delivered everything due at ``time_ms`` (5.3.3's acks
        of a ck are due at its revive time)."""
        timer = getattr(self.c, "timer_message_store", None)
        return timer is None or timer.read_ms > time_ms + timer.precision

    async def revive(self, ck: PopCheckPoint, offsets: list[int]) -> bool:
        for offset in offsets:
            result = self.store.get_message(ck.cid, ck.topic, ck.queue_id, offset, 1)
            if result is None:
                return False
            try:
                if result.status.name != "FOUND" or not result.message_count:
                    log.warning("revive: message %s:%d:%d is gone", ck.topic, ck.queue_id, offset)
                    continue
                msg = decode_message(result.message_buffers[0])
            finally:
                result.release()
            if not await self._reput(ck, msg):
                return False
        return True

    async def _reput(self, ck: PopCheckPoint, old) -> bool:
        """``reviveRetry``: the message into the pop retry topic (reconsume
        times + 1), or to %DLQ%group past the group's retryMaxTimes."""
        group = ck.cid
        topic = normal_topic(ck.topic, group)
        cfg = self.c.subscription_group_manager.find_subscription_group_config(group)
        max_times = cfg.retryMaxTimes if cfg is not None else 16
        props = dict(old.properties)
        props.pop(mc.PROPERTY_WAIT_STORE_MSG_OK, None)
        props.pop("POP_CK", None)
        props.setdefault(mc.PROPERTY_RETRY_TOPIC, topic)
        props.setdefault(PROPERTY_FIRST_POP_TIME, str(ck.pop_time))
        if not props.get(mc.PROPERTY_ORIGIN_MESSAGE_ID):
            props[mc.PROPERTY_ORIGIN_MESSAGE_ID] = props.get(
                mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or create_message_id(
                old.store_host, old.commit_log_offset)
        tcm = self.c.topic_config_manager
        if old.reconsume_times >= max_times:
            new_topic = T.dlq_topic(group)
            tcm.create_topic_in_send_message_back_method(new_topic, 1,
                                                         mc.PERM_READ | mc.PERM_WRITE, 0)
            reconsume = old.reconsume_times
        else:
            new_topic = (retry_topic_v2(topic, group) if self.bc.enableRetryTopicV2
                         else retry_topic_v1(topic, group))
            tcm.create_topic_in_send_message_back_method(new_topic, 1,
                                                         mc.PERM_READ | mc.PERM_WRITE, 0)
            reconsume = old.reconsume_times + 1
        tags = props.get(mc.PROPERTY_TAGS)
        msg = MessageExtBrokerInner(
            new_topic, 0, old.flag, old.body, props, message_properties_to_string(props),
            mc.tags_string_to_code(tags) if tags else 0, old.sys_flag & ~0x30,
            old.born_timestamp, old.born_host, self.store.store_host, 0, reconsume)
        result = await self.store.async_put_message(msg)
        ok = result is not None and result.status.name == "PUT_OK"
        if ok:
            self.revived += 1
            if T.is_dlq_topic(new_topic):
                self.c.stats.inc_dlq(group, topic)
        else:
            log.warning("revive put of %s:%d:%d failed: %s", ck.topic, ck.queue_id,
                        old.queue_offset, result.status.name if result else None)
        return ok

    async def _write_settled(self, entry: Pending, offsets: list[int]) -> None:
        """A batch ack of what was revived: a replay skips it."""
        ck = entry.ck
        ack = AckMsg(ck.topic, ck.cid, ck.queue_id, ck.start_offset, ck.pop_time,
                     ck.broker_name, offsets)
        await self.write(entry.revive_qid, ack)

    # ---- the persisted revive offset ---------------------------------------------
    def commit_revive_offsets(self) -> None:
        com = self.c.consumer_offset_manager
        for qid in range(self.queue_num):
            entries = self.by_queue.get(qid)
            offset = self.read_offsets.get(qid, 0)
            if entries:
                offset = min(offset, min(e.record_offset for e in entries.values()))
            # kept as 5.3.3 keeps it: the last record done with (5.3.3 reads on
            # from the next one), so one before the oldest unsettled ck
            done = offset - 1
            stored = com.query_offset(REVIVE_GROUP, self.topic, qid)
            # a revive queue never written stays out of consumerOffset.json, so
            # a broker that serves no POP writes 4.9.8's file
            if stored != done and not (stored < 0 and done < 0):
                com.commit_offset("PopReviveService", REVIVE_GROUP, self.topic, qid, done)


def _written(svc: PopReviveService, qid: int, record: PopCheckPoint | AckMsg,
             offset: int) -> None:
    """Apply a record this broker stored at ``offset`` of revive queue ``qid``.
    This and ``_add_ck`` / ``_apply_ack`` run for each record of a pop and an
    ack: compiled twins in ``rmq._fast.pop_revive``."""
    read = svc.read_offsets.get(qid, 0)
    if offset < read:
        return  # read back (and applied) while its put waited
    if offset == read and svc.loaded:  # the next to read: read on past it
        svc.read_offsets[qid] = offset + 1
    else:  # behind records not read yet, or before the first read: skipped there
        svc.applied.setdefault(qid, set()).add(offset)
    if isinstance(record, PopCheckPoint):
        _add_ck(svc, record, qid, offset)
        if record.revive_time < svc._next_wake_ms:
            svc._wake.set()  # due before the service would look again
    else:
        _apply_ack(svc, record)


def _add_ck(svc: PopReviveService, ck: PopCheckPoint, qid: int, record_offset: int,
            via_timer: bool = False) -> None:
    """A checkpoint pending (once per key): ``Pending`` in the map and its
    queue's map, its due time on the heap, and the group's offset past its
    messages: a pop commits it in memory only, so a replay after a crash puts
    it back (never backwards)."""
    key = ck.key()
    if key in svc.pending:
        return
    entry = _Pending(ck, qid, record_offset, via_timer)
    svc.pending[key] = entry
    svc.by_queue.setdefault(qid, {})[key] = entry
    svc._seq += 1
    due = ck.revive_time + (TIMER_ACK_GRACE_MS if via_timer else 0)
    heapq.heappush(svc.heap, (due, svc._seq, key))
    if not ck.offset_diffs:
        return
    com = svc.c.consumer_offset_manager
    last = ck.start_offset + max(ck.offset_diffs) + 1
    if com.query_offset(ck.cid, ck.topic, ck.queue_id) < last:
        com.commit_offset("PopReviveService", ck.cid, ck.topic, ck.queue_id, last)


def _apply_ack(svc: PopReviveService, ack: AckMsg) -> None:
    """The ack's offsets off its pending checkpoint, settled once none is left
    (an ack of no pending checkpoint: settled already, or never ours; 5.3.3
    ignores it as well)."""
    key = ack.key()
    entry = svc.pending.get(key)
    if entry is not None and entry.ack(ack.offsets):
        svc._settle(key)


_TAG_CODES = {t: mc.tags_string_to_code(t) for t in (CK_TAG, ACK_TAG, BATCH_ACK_TAG)}


def bind_compiled(c: Any) -> None:
    """Hand ``rmq._fast.pop_revive`` what it needs of the layers above it."""
    c.bind(PopCheckPoint, TIMER_ACK_GRACE_MS, FlushDiskType.SYNC_FLUSH,
           BrokerRole.SYNC_MASTER, tuple((t, _TAG_CODES[t]) for t in (CK_TAG, ACK_TAG,
                                                                      BATCH_ACK_TAG)),
           PROPERTY_TIMER_DELIVER_MS, mc.PROPERTY_TAGS)


_write_now = PopReviveService.write_now
_write_ck_now = PopReviveService.write_ck_now
_write_ack_now = PopReviveService.write_ack_now
Pending = _Pending
written = _written
add_ck = _add_ck
apply_ack = _apply_ack
_c = compiled("pop_revive")
if _c is not None:
    bind_compiled(_c)
    Pending = _c.Pending  # type: ignore[misc]
    written = _c.written
    add_ck = _c.add_ck
    apply_ack = _c.apply_ack
    # a pop's and an ack's record: body, append and bookkeeping in one compiled call
    PopReviveService.write_now = _c.write_now  # type: ignore[method-assign]
    PopReviveService.write_ck_now = _c.write_ck_now  # type: ignore[method-assign]
    PopReviveService.write_ack_now = _c.write_ack_now  # type: ignore[method-assign]
    # the compiled pop and ack write their records of offsets in a C array
    # through these when a service's write_ck_now / write_ack_now are still them
    _c.bind_service(PopReviveService)


def _record_props(tag: str, now: int) -> tuple[dict[str, str], str]:
    """A revive record's tag and TIMER_DELIVER_MS = its write time: 5.3.3's
    records reach the revive topic through the timer and keep their due time
    there, and a 5.3.3 broker reading these queues (a store handed over)
    moves its revive clock only with that property; a time not in the future
    keeps the record out of the timer here."""
    props = {mc.PROPERTY_TAGS: tag, PROPERTY_TIMER_DELIVER_MS: str(now)}
    return props, message_properties_to_string(props)


def record_properties(tag: str, now: int) -> str:
    """The stored property string of ``_record_props``' map, written at once:
    ``message_properties_to_string`` of it (HashMap order puts
    TIMER_DELIVER_MS first; no trailing separator)."""
    return f"{PROPERTY_TIMER_DELIVER_MS}\x01{now}\x02{mc.PROPERTY_TAGS}\x01{tag}"


def record_body(record: PopCheckPoint | AckMsg) -> tuple[bytes, str]:
    """A ck or ack record's body and tag."""
    if isinstance(record, PopCheckPoint):
        return record.encode(), CK_TAG
    return record.encode()


def put_at_once(store: Any, topic: str, qid: int, body: bytes, tag: str,
                now: int) -> tuple[int, int] | None:
    """A revive record stored through the store's one-record append session
    (``put_single``, as the timer's delivery stores): (queue offset, end of
    the record in the commit log), or None with nothing done when the general
    put must store it.  The record, its consume-queue entry, statistics and
    arrival notice are what ``put_general`` gives; what that put does beyond
    them is not needed here: the record is plain (no transaction, delay,
    keys or multi-dispatch), its TIMER_DELIVER_MS is not in the future (the
    timer hook lets it through when the wheel is on; without the wheel the
    hook refuses it, so that case goes the general way), and the slave wait
    of a SYNC_MASTER is left to the general put (the caller waits for a
    SYNC_FLUSH group commit: ``put_revive_record``)."""
    cfg = store.config
    if cfg.brokerRole is BrokerRole.SYNC_MASTER or not cfg.timerWheelEnable or \
            not topic.isascii():
        return None
    cl = store.commit_log
    r = put_single(store, topic, topic.encode(), qid, 0, body, None, None,
                   record_properties(tag, now), _TAG_CODES[tag], 0, now, cl.store_host_field, 0)
    if r is None:
        return None
    return r[0], r[2] + r[3]


async def put_general(store: Any, topic: str, qid: int, body: bytes, tag: str,
                      now: int) -> int | None:
    """A revive record through the store's general put: its queue offset,
    None when the store refused it."""
    props, text = _record_props(tag, now)
    msg = MessageExtBrokerInner(
        topic, qid, 0, body, props, text, _TAG_CODES[tag], 0, now,
        store.store_host, store.store_host, 0, 0)
    result = await store.async_put_message(msg)
    if result is None or result.status is not PUT_OK or result.append_result is None:
        return None
    return result.append_result.logics_offset


async def put_revive_record(controller: Any, topic: str, qid: int,
                            record: PopCheckPoint | AckMsg) -> int | None:
    """A ck or ack record into revive queue ``qid``; its queue offset once
    stored (and flushed under SYNC_FLUSH), None when the store refused it."""
    body, tag = record_body(record)
    now = now_ms()
    store = controller.message_store
    put = put_at_once(store, topic, qid, body, tag, now)
    if put is None:
        return await put_general(store, topic, qid, body, tag, now)
    offset, end = put
    if store.config.flushDiskType is FlushDiskType.SYNC_FLUSH:
        fut = asyncio.get_running_loop().create_future()
        if wait_flush(store, end, True, fut, _flushed) and await fut is not PUT_OK:
            return None  # as the general put answers FLUSH_DISK_TIMEOUT
    return offset


def _flushed(fut: asyncio.Future, status: PutMessageStatus) -> None:
    if not fut.done():
        fut.set_result(status)
