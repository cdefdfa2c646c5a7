"""Dispatch of stored records (the ``ReputMessageService`` of 4.9.8's
``DefaultMessageStore``): every record the commit log makes readable goes into
its consume queue and the index, and the arrival listener (long polling) hears
of it.

A mixin of ``DefaultMessageStore`` rather than a separate object because the
put path, recovery and HA all read and move ``reput_from_offset`` under the
same lock; keeping the state on the store keeps those paths one attribute
access away.  Dispatch runs on the broker's event loop: the put path
dispatches the record it has just written (``_dispatch_put``), and the commit
thread schedules ``do_reput`` there for everything else (slave replication,
transient-pool commits).
"""

from __future__ import annotations

import logging
import struct
import threading

from rmq._fast import compiled
from rmq.common import message as mc
from rmq.common.topics import SCHEDULE_TOPIC
from rmq.store import message_codec as codec
from rmq.store.config import BrokerRole
from rmq.store.dispatch import dispatch_run, dispatch_walk
from rmq.store.dispatch_room import count_keys
from rmq.store.message import MessageExtBrokerInner
from rmq.store.results import AppendMessageResult

log = logging.getLogger("store")

_INDEX_COUNT = struct.Struct(">i")  # an index file's entry count, at byte 36 of its header
_TX_MASK = mc.TRANSACTION_ROLLBACK_TYPE  # transaction bits of sysFlag
_TX_NOT = mc.TRANSACTION_NOT_TYPE
_TX_COMMIT = mc.TRANSACTION_COMMIT_TYPE
_TX_ROLLBACK = mc.TRANSACTION_ROLLBACK_TYPE


class DispatchStalled(Exception):
    """A consume-queue or index file could not be made for want of disk space.
    The record stays undispatched (``reput_from_offset`` does not pass it) and
    is dispatched again once there is room; its entries are idempotent."""


class ReputMixin:
    """Dispatch half of ``DefaultMessageStore`` (see the module docstring)."""

    def mark_no_space(self, what: str) -> None:
        """A new file of ``what`` did not fit on the disk: mark the disk full,
        so puts are refused until the clean service sees room again (4.9.8
        only learns it from the used ratio, every 10 s; a full disk under a
        sparse file then ends the JVM with SIGBUS)."""
        if self.running_flags.get_and_make_disk_full():
            log.error("no space left on device for a new %s file, so mark disk full", what)

    def on_committed(self) -> None:
        """Called by the commit thread: dispatch on the loop when there is one."""
        loop = self._loop
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(self.do_reput)
        else:
            self.do_reput()

    def do_reput(self) -> None:
        """Dispatch every readable record after ``reput_from_offset`` into the
        consume queues and the index; notify the arrival listener."""
        cl = self.commit_log
        listener = self.message_arriving_listener
        if self.config.brokerRole is BrokerRole.SLAVE:
            listener = None
        with self._reput_lock:
            while self.reput_from_offset < cl.get_max_offset():
                if self.reput_from_offset < cl.get_min_offset():
                    self.reput_from_offset = cl.get_min_offset()
                data = cl.get_data(self.reput_from_offset)
                if data is None:
                    break
                view, start = data
                n = len(view)
                try:
                    pos, roll = self._dispatch_region(view, listener is not None)
                finally:
                    view.release()
                if roll:
                    self.reput_from_offset = cl.roll_next_file(start + pos)
                    continue
                self.reput_from_offset = start + pos
                if pos < n:
                    break
            ix = self.index_service
            if ix is not None and ix.promised and not cl.dispatch_on_commit and \
                    self.reput_from_offset >= cl.mfq.get_max_wrote_position():
                ix.promised = 0  # every put taken is dispatched: no room is owed

    def _dispatch_region(self, view, notify: bool) -> tuple[int, bool]:
        """Scan and dispatch the records of one readable region; returns the
        position reached and whether a blank (end of file) was met."""
        walk = self.commit_log.dispatch_entries
        if walk is not None:  # records inside entries of another format (DLedger's)
            run = None
            pos = 0
            if self._bulk_dispatch:
                # the common case: one compiled walk takes the whole region
                pos = reput_walk(self, view, 0, len(view), notify)
                if pos >= len(view):
                    return pos, False

                def run(v, p: int, end: int) -> int:
                    return reput_walk(self, v, p, end, notify)
            return walk(view, lambda r: self._dispatch(r, notify), run, pos)
        scan = codec.scan_record
        dispatch = self._dispatch
        n = len(view)
        pos = 0
        while pos < n:
            r = scan(view, pos, n, False)
            st = r[0]
            if st == codec.SCAN_MESSAGE:
                try:
                    dispatch(r, notify)
                except DispatchStalled:
                    return pos, False
                pos += r[1]
                if pos < n and self._bulk_dispatch:
                    pos = self._dispatch_run(view, pos, n, r[2], r[3], notify)
            elif st == codec.SCAN_BLANK:
                return pos, True
            elif st == codec.SCAN_SIZE_MISMATCH and r[1] > 0:
                log.error("[BUG]read total count not equals msg total size at %d", r[5] + pos)
                pos += r[1]
            else:
                break
        return pos, False

    @property
    def _bulk_dispatch(self) -> bool:
        """Whether runs of one queue's records may be dispatched in bulk: not
        when a run may hold multi-dispatch records, nor when entries go through
        the ext files (tags codes, store times and bitmaps per message)."""
        return not self.commit_log.multi.enabled and not self.config.enableConsumeQueueExt

    def _bulk_index(self) -> tuple | None:
        """The current index file's buffer for a bulk dispatch and its entry
        count now ((None, 0) with indexing off); None when there is no index
        file to write (the per-record path makes one or stalls)."""
        if not self.config.messageIndexEnable:
            return None, 0
        f = self.index_service.writable_file()
        if f is None:
            return None
        return f.mf.view, _INDEX_COUNT.unpack_from(f.mf.view, 36)[0]

    def _index_room_used(self, index, used: int) -> None:
        """A bulk dispatch's keys used the room puts kept for them."""
        ix = self.index_service
        if index is not None and ix.promised:
            ix.promised = max(0, ix.promised - (_INDEX_COUNT.unpack_from(index, 36)[0] - used))

    def _dispatch_run(self, view, pos: int, n: int, topic: str, queue_id: int, notify: bool) -> int:
        """Dispatch the following records of the same topic/queue in bulk
        (``dispatch.dispatch_run``); returns where the per-record path resumes."""
        cq = self._existing_cq(topic, queue_id)
        mf = cq.tail_file if cq is not None else None
        if mf is None or mf.wrote_position >= cq.file_size:
            return pos
        bulk = self._bulk_index()
        if bulk is None:
            return pos
        index, used = bulk
        cfg = self.config
        topic_b = self._topic_bytes.get(topic)
        if topic_b is None:
            topic_b = self._topic_bytes[topic] = topic.encode("utf-8")
        new_pos, cq_pos, count, max_phy, last = dispatch_run(
            view, pos, n, topic_b, queue_id, mf.view, mf.wrote_position, mf.file_from_offset,
            cq.max_physic_offset, index, cfg.maxHashSlotNum, cfg.maxIndexNum,
        )
        if count:
            self._index_room_used(index, used)
            mf.wrote_position = mf.committed_position = cq_pos
            cq.max_physic_offset = max_phy
            qoff, tags_code, store_ts = last
            self.checkpoint.logics_msg_timestamp = store_ts
            if notify:
                self._notify(topic, queue_id, qoff + 1, tags_code, store_ts, count, new_pos - pos)
        return new_pos

    def _notify_runs(self, runs: list[tuple]) -> None:
        """The arrival notices of a walk's queues (``RunQueue.summary`` tuples,
        one request counted per queue as ``_notify`` counts it): in one call
        of the store's runs listener when it has one and dispatch runs on the
        loop's thread, else one ``_notify`` per queue."""
        runs_listener = self.message_runs_listener
        if runs_listener is None or (self._loop is not None and
                                     threading.get_ident() != self._loop_thread):
            for topic, queue_id, next_offset, tags_code, store_ts, nums, size, _e, _each in runs:
                self._notify(topic, queue_id, next_offset, tags_code, store_ts, nums, size)
            return
        try:
            runs_listener(runs)
        except Exception:  # noqa: BLE001 - a listener bug must not stop dispatch
            log.exception("message arriving listener failed")

    def _walk_queue(self, topic_b: bytes, queue_id: int) -> tuple | None:
        """A queue's consume-queue file for ``dispatch_walk``, None when its
        entry must go the per-record way (no queue or file yet, a full file)."""
        topic = topic_b.decode()
        qs = self.consume_queue_table.get(topic)  # (_existing_cq, inline: once per queue a walk)
        cq = qs.get(queue_id) if qs is not None else None
        mf = cq.tail_file if cq is not None else None
        if mf is None or mf.wrote_position >= cq.file_size:
            return None
        return ((cq, mf, topic, queue_id), mf.view, mf.wrote_position, mf.file_from_offset,
                cq.max_physic_offset)

    def _dispatch_put(self, msg: MessageExtBrokerInner, ar: AppendMessageResult) -> bool:
        """Dispatch the record a single put has just written from what the put
        already knows (topic, queue, offsets, the property map) instead of
        reading it back: the same consume-queue entry, index keys and arrival
        notification as the reput scan, without decoding the record again.
        Only for the next record to dispatch and an ordinary message (no
        prepared/rollback transaction, no SCHEDULE_TOPIC tagsCode); False
        leaves it to ``do_reput``."""
        tx = msg.sys_flag & _TX_MASK
        if (tx != _TX_NOT and tx != _TX_COMMIT) or msg.topic == SCHEDULE_TOPIC:
            return False
        with self._reput_lock:
            phy = ar.wrote_offset
            if self.reput_from_offset != phy:
                return False
            props = msg.properties
            tags = props.get(mc.PROPERTY_TAGS)
            try:
                tags_code = codec.tags_code(tags) if tags else 0
                notify = self.message_arriving_listener is not None
                bitmap = self._bitmap(msg.topic, props)
                self._dispatch_entry(
                    msg.topic, msg.queue_id, ar.logics_offset, phy, ar.wrote_bytes, tx,
                    ar.store_timestamp, tags_code, props.get(mc.PROPERTY_KEYS),
                    props.get(mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), notify, bitmap)
                if self.commit_log.multi.enabled:
                    self._dispatch_extra(props, msg.queue_id, phy, ar.wrote_bytes, tags_code,
                                         ar.store_timestamp, notify, bitmap)
            except DispatchStalled:
                return False
            self.reput_from_offset = phy + ar.wrote_bytes
        return True

    def _dispatch_entry(self, topic: str, queue_id: int, queue_offset: int, phy: int, size: int,
                        tx: int, store_ts: int, tags_code: int, keys: str | None,
                        uniq: str | None, notify: bool, bitmap: bytes | None = None) -> None:
        """Consume-queue entry, index keys and arrival notification of one
        ordinary record (``_dispatch_put``'s half of ``_dispatch``)."""
        self._put_cq_entry(topic, queue_id, queue_offset, phy, size, tags_code, store_ts, bitmap)
        if (keys or uniq) and self.config.messageIndexEnable:
            self._build_index(topic, phy, store_ts, keys, uniq)
        if notify:
            self._notify(topic, queue_id, queue_offset + 1, tags_code, store_ts, 1, size)

    def _put_cq_entry(self, topic: str, queue_id: int, queue_offset: int, phy: int, size: int,
                      tags_code: int, store_ts: int, bitmap: bytes | None = None) -> None:
        """The record's consume-queue entry (with its ext unit when the queue
        has ext files); a queue that refuses it marks the logics queues in
        error (the store stops taking puts, as 4.9.8)."""
        qs = self.consume_queue_table.get(topic)
        cq = qs.get(queue_id) if qs is not None else None
        if cq is None:
            cq = self.find_consume_queue(topic, queue_id)
        if cq.put_message_position_info(phy, size, tags_code, queue_offset, store_ts, bitmap):
            self.checkpoint.logics_msg_timestamp = store_ts
        elif cq.mfq.no_space:
            self.mark_no_space("consume queue")
            raise DispatchStalled
        else:
            self.running_flags.make_logics_queue_error()

    def _build_index(self, topic: str, phy: int, store_ts: int, keys: str | None,
                     uniq: str | None) -> None:
        ix = self.index_service
        if ix.promised:  # the room a put kept for these keys is used now
            ix.promised = max(0, ix.promised - count_keys(keys, uniq))
        if not ix.build_index(topic, phy, store_ts, keys, uniq):
            if self.index_service.no_space:
                self.mark_no_space("index")
                raise DispatchStalled
            self.running_flags.make_index_file_error()

    def _dispatch(self, r: tuple, notify: bool) -> None:
        (_st, size, topic, queue_id, queue_offset, phy, sys_flag, store_ts, tags_code,
         keys, uniq, delay, _props_pos, props_len, _prepared) = r
        tx = sys_flag & _TX_MASK
        bitmap = None
        if tx == _TX_NOT or tx == _TX_COMMIT:
            if delay is not None and topic == SCHEDULE_TOPIC:
                tags_code = self.commit_log.delay_tags_code(store_ts, delay)
            if props_len and self.bitmap_calculator is not None and self.config.enableConsumeQueueExt:
                bitmap = self._bitmap(topic, self._record_properties(phy, size, props_len))
            self._put_cq_entry(topic, queue_id, queue_offset, phy, size, tags_code, store_ts, bitmap)
        if (keys or uniq) and tx != _TX_ROLLBACK and self.config.messageIndexEnable:
            self._build_index(topic, phy, store_ts, keys, uniq)
        if notify and (tx == _TX_NOT or tx == _TX_COMMIT):
            self._notify(topic, queue_id, queue_offset + 1, tags_code, store_ts, 1, size)
        if self.commit_log.multi.enabled and r[13] and (tx == _TX_NOT or tx == _TX_COMMIT):
            record = self.commit_log.get_message(phy, size)
            if record is not None:  # the properties are the record's last bytes
                text = bytes(record[size - r[13]:size])
                if b"INNER_MULTI_DISPATCH" in text:
                    props = codec.string_to_message_properties(text.decode("utf-8", "replace"))
                    self._dispatch_extra(props, queue_id, phy, size, tags_code, store_ts, notify,
                                         bitmap)

    def _record_properties(self, phy: int, size: int, props_len: int) -> dict[str, str]:
        """The property map of the stored record at ``phy`` (its last bytes)."""
        record = self.commit_log.get_message(phy, size)
        if record is None:
            return {}
        text = bytes(record[size - props_len:size])
        return codec.string_to_message_properties(text.decode("utf-8", "replace"))

    def _bitmap(self, topic: str, props: dict[str, str]) -> bytes | None:
        """The SQL92 bitmap of a message (``CommitLogDispatcherCalcBitMap``):
        only computed when the store keeps ext units to put it in."""
        calc = self.bitmap_calculator
        if calc is None or not self.config.enableConsumeQueueExt:
            return None
        return calc(topic, props)

    def _dispatch_extra(self, props: dict[str, str], queue_id: int, phy: int, size: int, tags_code: int,
                        store_ts: int, notify: bool, bitmap: bytes | None = None) -> None:
        """The entries of a multi-dispatched record in its extra queues (LMQs)."""
        for name, qid, offset in self.commit_log.multi.entries(props, queue_id):
            self._put_cq_entry(name, qid, offset, phy, size, tags_code, store_ts, bitmap)
            if notify:
                self._notify(name, qid, offset + 1, tags_code, store_ts, 1, size)

    def _notify(self, topic: str, queue_id: int, next_offset: int, tags_code: int,
                store_ts: int, nums: int = 1, size: int = 0) -> None:
        """The arrival listener, on the loop's thread (directly when dispatch
        runs there, which is the put path's case).  One notice may stand for a
        run of ``nums`` messages of the queue ending at ``next_offset`` (the
        tags code is the last one's): long polling needs only the last, the
        put statistics count all.  No property map is passed: no listener
        reads one (long polling filters by tags code; a pull answers SQL92
        filters itself), and building it per message cost the put path."""
        listener = self.message_arriving_listener
        loop = self._loop
        if loop is not None and threading.get_ident() != self._loop_thread and loop.is_running():
            loop.call_soon_threadsafe(listener, topic, queue_id, next_offset, tags_code,
                                      store_ts, nums, size)
            return
        try:
            listener(topic, queue_id, next_offset, tags_code, store_ts, nums, size)
        except Exception:  # noqa: BLE001 - a listener bug must not stop dispatch
            log.exception("message arriving listener failed")

    def dispatch_behind_bytes(self) -> int:
        return max(0, self.commit_log.get_max_offset() - self.reput_from_offset)


def _reput_walk(store, view, pos: int, n: int, notify: bool) -> int:
    """Dispatch a reput's records from ``pos`` of whatever queues in one walk
    (``dispatch.dispatch_walk``: each record's consume-queue entry and index
    keys written in place, each queue's file asked for once through
    ``store._walk_queue``), then move the queues' files and maximum offsets,
    the index room kept and the checkpoint's logics timestamp, and tell the
    arrival listener (``store._notify_runs``).  Returns where the
    per-record path resumes.  The twin of ``rmq._fast.store_dispatch.reput_walk``,
    which does the same in one call (the queue look-ups and the listener's
    call included)."""
    bulk = store._bulk_index()
    if bulk is None:
        return pos
    index, used = bulk
    cfg = store.config
    new_pos, queues = dispatch_walk(view, pos, n, store._walk_queue, index, cfg.maxHashSlotNum,
                                    cfg.maxIndexNum, store.commit_log.entry_header)
    if queues:
        store._index_room_used(index, used)
        latest = 0
        runs = []
        for (cq, mf, topic, queue_id), cq_pos, count, max_phy, last, size in queues:
            mf.wrote_position = mf.committed_position = cq_pos
            cq.max_physic_offset = max_phy
            qoff, tags_code, store_ts = last
            if store_ts > latest:
                latest = store_ts
            runs.append((topic, queue_id, qoff + 1, tags_code, store_ts, count, size, 1, None))
        store.checkpoint.logics_msg_timestamp = latest
        if notify:
            store._notify_runs(runs)
    return new_pos


_c = compiled("store_dispatch")
reput_walk = _reput_walk if _c is None else _c.reput_walk
