"""CommitLog: appends records, recovers after restarts, serves raw reads.

Mirrors ``CommitLog`` of 4.9.8 (STORE_FORMAT.md 2, 9.3, 9.4).  Appends run on
the caller's thread (the broker's event loop) under ``put_lock``; the time the
lock was taken is ``begin_time_in_lock`` for isOSPageCacheBusy.  Records are
encoded straight into the mapped file (or the transient write buffer) by
``message_codec.write_record`` / ``write_batch``.
"""

from __future__ import annotations

import logging
import struct
import threading
import time
from collections.abc import Callable

from rmq.common import message as mc
from rmq.common.message_id import socket_address_bytes
from rmq.common.topics import SCHEDULE_TOPIC
from rmq.store import message_codec as codec
from rmq.store.allocate import AllocateMappedFileService
from rmq.store.append_run import AppendRun, open_run
from rmq.store.batch_append import batch_key_count
from rmq.store.config import FlushDiskType
from rmq.store.dispatch_room import count_keys
from rmq.store.mapped_file import (
    MappedFile,
    MappedFileQueue,
    TransientStorePool,
)
from rmq.store.message import MessageExtBatch, MessageExtBrokerInner
from rmq.store.multi_dispatch import MultiDispatch
from rmq.store.results import AppendMessageResult, AppendMessageStatus, msg_id_host_hex

log = logging.getLogger("store")

_LONG = struct.Struct(">q")
_INT = struct.Struct(">i")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000



class CommitLog:
    # A commit log whose records lie inside entries of another format (DLedger's)
    # walks a readable region itself: ``dispatch_entries(view, dispatch, run, pos)``
    # walks from ``pos`` (an entry's start), calls ``run(view, pos, end)`` (unless
    # None: a bulk dispatch from ``pos``, which returns where it stopped) and
    # ``dispatch(scan)`` for each record it left; it returns (position reached,
    # blank met)
    dispatch_entries: Callable[..., tuple[int, bool]] | None = None
    # The bytes of such an entry's header before its record (a bulk walk of
    # ``dispatch.dispatch_walk`` steps over them)
    entry_header = 0
    # Whether records are dispatched once the log commits them (a DLedger group's
    # commit listener) rather than by the put that wrote them
    dispatch_on_commit = False
    # Whether a put's result waits for a replication quorum (the append result's
    # future): the send processor then answers through a callback on it
    waits_for_quorum = False
    # the fields each single put and each send lane read use slotted: the
    # compiled put (rmq._fast.store_put) and lane (rmq._fast.send_lane) read
    # them at their slots; the rest in the dict
    __slots__ = ("begin_time_in_lock", "zero_ahead_enabled", "topic_queue_table", "append_run",
                 "file_size", "store_host_field", "msg_id_prefix", "mfq", "multi", "__dict__",
                 "__weakref__")

    def __init__(self, store) -> None:
        cfg = store.config
        self.store = store
        self.config = cfg
        self.file_size = cfg.mappedFileSizeCommitLog
        self._open_files(cfg)
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self.put_lock = threading.Lock()
        self.begin_time_in_lock = 0
        self.confirm_offset = -1
        self.store_host_field = socket_address_bytes(store.store_host)
        self.store_host_v6 = len(self.store_host_field) == 20
        self.msg_id_prefix = msg_id_host_hex(store.store_host)  # offset message ids' head
        self._host_cache: dict[tuple[str, int], bytes] = {}
        self.append_run: AppendRun | None = None  # the one append session, armed by open_run
        self.multi = MultiDispatch(cfg.enableMultiDispatch, cfg.enableLmq)
        self.delay_table = cfg.delay_level_table()
        self.max_delay_level = max(self.delay_table) if self.delay_table else 0

    def _open_files(self, cfg) -> None:
        """The files the log is appended to (``mfq``), their allocator, and
        whether appends zero the pages ahead of themselves."""
        # the appenders write zeros ahead of themselves (zero_ahead), unless
        # appends go through a transient pool's buffers or files are warmed whole
        self.zero_ahead_enabled = cfg.rmqZeroFillAheadEnable and \
            not cfg.is_transient_store_pool_active() and not cfg.warmMapedFileEnable
        # under SYNC_FLUSH new files get their blocks written before use
        # (MappedFile.write_blocks)
        prewrite = cfg.rmqPrewriteCommitLogEnable and cfg.flushDiskType is FlushDiskType.SYNC_FLUSH
        self.allocator = AllocateMappedFileService(cfg.warmMapedFileEnable,
                                                   populate=not self.zero_ahead_enabled,
                                                   prewrite=prewrite)
        self.mfq = MappedFileQueue(cfg.commit_log_dirs(), self.file_size, self.allocator,
                                   cfg.read_only_commit_log_dirs())
        self.mfq.zero_ahead = self.zero_ahead_enabled
        if cfg.is_transient_store_pool_active():
            self.mfq.pool = TransientStorePool(cfg.transientStorePoolSize, self.file_size)

    # --- load / offsets ------------------------------------------------------------
    def load(self) -> bool:
        return self.mfq.load()

    def get_min_offset(self) -> int:
        mf = self.mfq.get_first_mapped_file()
        return mf.file_from_offset if mf is not None else -1

    def get_max_offset(self) -> int:
        return self.mfq.get_max_offset()

    def roll_next_file(self, offset: int) -> int:
        return offset + self.file_size - offset % self.file_size

    def readable_file(self, offset: int, size: int) -> tuple[memoryview, int] | None:
        """(readable bytes of the file holding ``offset``, the file's start
        offset) when the ``size``-byte record at ``offset`` lies within them;
        None when the file is gone, unmapped or not written that far.  What a
        consume-queue walk asks each time its records move to another file
        (``read_queue`` and its compiled twin); the caller releases the view."""
        mf = self.mfq.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        readable = mf.select(0)  # None once unmapped
        if readable is None:
            return None
        start = mf.file_from_offset
        if size >= 0 and start <= offset and offset + size <= start + len(readable):
            return readable, start
        readable.release()
        return None

    def host_field(self, host: tuple[str, int]) -> bytes:
        """The stored host field (4/16-byte address, 4-byte port) of ``host``."""
        f = self._host_cache.get(host)
        if f is None:
            f = socket_address_bytes(host)
            if len(self._host_cache) > 10000:
                self._host_cache.clear()
            self._host_cache[host] = f
        return f


    # --- appends --------------------------------------------------------------------
    def _redirect_delay(self, msg: MessageExtBrokerInner) -> None:
        """STORE_FORMAT.md 2.11: a delayed message goes to SCHEDULE_TOPIC_XXXX
        queue level-1 with its real topic and queue in properties."""
        level = msg.delay_time_level()
        if level <= 0:
            return
        level = min(level, self.max_delay_level)
        props = msg.properties
        props[mc.PROPERTY_DELAY_TIME_LEVEL] = str(level)
        props[mc.PROPERTY_REAL_TOPIC] = msg.topic
        props[mc.PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
        msg.properties_string = codec.message_properties_to_string(props)
        msg.topic = SCHEDULE_TOPIC
        msg.queue_id = level - 1

    def _writable_file(self) -> MappedFile | None:
        return self.mfq.get_last_mapped_file(0, need_create=True)

    def dispatch_room_for(self, msg: MessageExtBrokerInner, queue_offset: int, counts: bool,
                          extra: list[tuple[str, int]] | None = None) -> bool:
        """Under the put lock, before the record is written: the files the
        message's dispatch needs exist or are made now (DispatchRoom);
        ``extra``: the queues of a multi-dispatched message (LMQs)."""
        props = msg.properties
        if msg.sys_flag & mc.TRANSACTION_ROLLBACK_TYPE == mc.TRANSACTION_ROLLBACK_TYPE:
            keys = 0  # a rollback is not indexed
        else:
            keys = count_keys(props.get(mc.PROPERTY_KEYS),
                              props.get(mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX))
        real = None
        if counts and msg.topic == SCHEDULE_TOPIC and mc.PROPERTY_REAL_TOPIC in props:
            try:  # its delivery later goes into the real topic's queue
                real = (props[mc.PROPERTY_REAL_TOPIC], int(props.get(mc.PROPERTY_REAL_QUEUE_ID, "0")))
            except ValueError:
                real = None
        room = self.store.dispatch_room
        if not room.reserve(msg.topic, msg.queue_id, queue_offset, 1 if counts else 0, keys, real):
            return False
        table = self.topic_queue_table
        return all(room.reserve(q, qid, table.get((q, qid), 0), 1, 0) for q, qid in extra or ())

    def zero_ahead(self, mf: MappedFile) -> None:
        """Before an append into ``mf``, under ``put_lock``: its zeros kept
        written ahead (MappedFile.zero_ahead), when the log does that."""
        if self.zero_ahead_enabled:
            mf.zero_ahead()

    def _file_with_room(self, mf: MappedFile | None, size: int) -> MappedFile | None:
        """The file an append of ``size`` bytes goes to, under ``put_lock``:
        ``mf`` (the last file), or the next one once ``mf`` is ended by its
        blank when the append and a blank's 8 bytes do not fit; its zeros
        kept ahead.  None when there is no file to write."""
        if mf is not None and size + 8 > self.file_size - mf.wrote_position:
            mf = self._end_file(mf)
        if mf is not None:
            self.zero_ahead(mf)
        return mf

    def _end_file(self, mf: MappedFile) -> MappedFile | None:
        """Write the blank at the tail of ``mf`` and move to the next file."""
        wrote = mf.wrote_position
        codec.write_blank(mf.target, wrote, self.file_size - wrote)
        mf.wrote_position = self.file_size
        if mf.write_buffer is None:
            mf.committed_position = self.file_size
        return self.mfq.get_last_mapped_file(0, need_create=True)

    def _sys_flag(self, flag: int, born: bytes) -> int:
        """sysFlag as stored: the host-kind bits of this born host and store host."""
        sys_flag = flag & ~0x30
        if len(born) == 20:
            sys_flag |= mc.BORNHOST_V6_FLAG
        if self.store_host_v6:
            sys_flag |= mc.STOREHOSTADDRESS_V6_FLAG
        return sys_flag

    def _prepare(self, msg: MessageExtBrokerInner,
                 overhead: int = 0) -> tuple[bytes, bytes, bytes, int, int] | AppendMessageResult:
        """Delay redirection and the checks before a record is written:
        (topic, properties, born host field, sysFlag, record size), or the
        result refusing it.  ``overhead``: what a file holds around a record."""
        tx = msg.sys_flag & mc.TRANSACTION_ROLLBACK_TYPE
        if tx in (mc.TRANSACTION_NOT_TYPE, mc.TRANSACTION_COMMIT_TYPE) and \
                mc.PROPERTY_DELAY_TIME_LEVEL in msg.properties:
            self._redirect_delay(msg)
        topic = msg.topic.encode("utf-8")
        props = msg.properties_string.encode("utf-8")
        body = msg.body
        if len(props) > codec.MAX_PROPERTIES_LENGTH:
            return AppendMessageResult(AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED)
        born = self.host_field(msg.born_host)
        sys_flag = self._sys_flag(msg.sys_flag, born)
        size = codec.record_size(sys_flag, len(body), len(topic), len(props))
        if len(body) > self.config.maxMessageSize or size > self.config.maxMessageSize + 65536 \
                or size + 8 + overhead > self.file_size:
            log.warning("message size exceeded, msg total size: %d, msg body size: %d, maxMessageSize: %d",
                        size, len(body), self.config.maxMessageSize)
            return AppendMessageResult(AppendMessageStatus.MESSAGE_SIZE_EXCEEDED)
        return topic, props, born, sys_flag, size

    def _prepare_batch(self, batch: MessageExtBatch, overhead: int = 0
                       ) -> tuple[bytes, bytes, bytes, int, int, int] | AppendMessageResult:
        """The checks before a batch's records are written: (topic, batch
        properties, born host field, sysFlag, bytes of all records, messages),
        or the result refusing it (a malformed body, no message, or records
        that do not fit into one file).  ``overhead``: what a file holds
        around each record."""
        topic = batch.topic.encode("utf-8")
        batch_props = batch.properties_string.encode("utf-8")
        born = self.host_field(batch.born_host)
        sys_flag = self._sys_flag(batch.sys_flag, born)
        try:
            total, count = codec.batch_size(batch.body, sys_flag, len(topic), len(batch_props))
        except ValueError as e:
            log.warning("bad batch body: %s", e)
            return AppendMessageResult(AppendMessageStatus.MESSAGE_SIZE_EXCEEDED)
        if count == 0 or total + overhead * count + 8 > self.file_size:
            return AppendMessageResult(AppendMessageStatus.MESSAGE_SIZE_EXCEEDED)
        return topic, batch_props, born, sys_flag, total, count

    def put_message(self, msg: MessageExtBrokerInner) -> AppendMessageResult:
        """Append one message; the result says where (or why not)."""
        prepared = self._prepare(msg)
        if type(prepared) is AppendMessageResult:
            return prepared
        topic, props, born, sys_flag, size = prepared
        body = msg.body
        tx = msg.sys_flag & mc.TRANSACTION_ROLLBACK_TYPE
        key = (msg.topic, msg.queue_id)
        counts = tx in (mc.TRANSACTION_NOT_TYPE, mc.TRANSACTION_COMMIT_TYPE)
        queues = self.multi.queues_of(msg.properties) if self.multi.enabled else None
        with self.put_lock:
            now = _now_ms()
            self.begin_time_in_lock = now
            try:
                if queues is not None:  # the extra queues' offsets go into the record
                    multi_keys, msg.properties_string = self.multi.wrap(
                        msg.properties, msg.queue_id, queues, self.topic_queue_table)
                    props = msg.properties_string.encode("utf-8")
                    if len(props) > codec.MAX_PROPERTIES_LENGTH:
                        return AppendMessageResult(AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED)
                    size = codec.record_size(sys_flag, len(body), len(topic), len(props))
                    if size > self.config.maxMessageSize + 65536 or size + 8 > self.file_size:
                        return AppendMessageResult(AppendMessageStatus.MESSAGE_SIZE_EXCEEDED)
                mf = self._writable_file()
                queue_offset = self.topic_queue_table.get(key, 0) if counts else 0
                if mf is not None and not self.dispatch_room_for(
                        msg, queue_offset, counts, multi_keys if queues is not None else None):
                    return AppendMessageResult(AppendMessageStatus.NO_ROOM_FOR_DISPATCH)
                mf = self._file_with_room(mf, size)
                if mf is None:
                    return AppendMessageResult(AppendMessageStatus.UNKNOWN_ERROR)
                wrote = mf.wrote_position
                phy = mf.file_from_offset + wrote
                codec.write_record(
                    mf.target, wrote, msg.queue_id, msg.flag, queue_offset, phy, sys_flag,
                    msg.born_timestamp, born, now, self.store_host_field, msg.reconsume_times,
                    msg.prepared_transaction_offset, body, topic, props,
                )
                mf.wrote_position = wrote + size
                if mf.write_buffer is None:
                    mf.committed_position = wrote + size
                mf.store_timestamp = now
                if counts:
                    self.topic_queue_table[key] = queue_offset + 1
                if queues is not None:
                    self.multi.advance(multi_keys, msg.properties, self.topic_queue_table)
            finally:
                self.begin_time_in_lock = 0
        msg.store_timestamp = now
        msg.sys_flag = sys_flag
        return AppendMessageResult(
            AppendMessageStatus.PUT_OK, phy, size, now, queue_offset, 1,
            _now_ms() - now, self.store.store_host,
        )

    def put_messages(self, batch: MessageExtBatch) -> AppendMessageResult:
        """Append a SEND_BATCH_MESSAGE body as consecutive records, all in one
        file (STORE_FORMAT.md 2.14)."""
        prepared = self._prepare_batch(batch)
        if type(prepared) is AppendMessageResult:
            return prepared
        topic, batch_props, born, sys_flag, total, count = prepared
        sizes = codec.new_sizes_array(count)
        key = (batch.topic, batch.queue_id)
        with self.put_lock:
            now = _now_ms()
            self.begin_time_in_lock = now
            try:
                mf = self._writable_file()
                queue_offset = self.topic_queue_table.get(key, 0)
                if mf is not None and not self.store.dispatch_room.reserve(
                        batch.topic, batch.queue_id, queue_offset, count,
                        batch_key_count(batch.body, batch_props)):
                    return AppendMessageResult(AppendMessageStatus.NO_ROOM_FOR_DISPATCH)
                mf = self._file_with_room(mf, total)
                if mf is None:
                    return AppendMessageResult(AppendMessageStatus.UNKNOWN_ERROR)
                wrote = mf.wrote_position
                phy = mf.file_from_offset + wrote
                codec.write_batch(
                    mf.target, wrote, batch.body, batch.queue_id, sys_flag, batch.born_timestamp,
                    born, now, self.store_host_field, batch.reconsume_times, topic, batch_props,
                    queue_offset, phy, sizes,
                )
                mf.wrote_position = wrote + total
                if mf.write_buffer is None:
                    mf.committed_position = wrote + total
                mf.store_timestamp = now
                self.topic_queue_table[key] = queue_offset + count
            finally:
                self.begin_time_in_lock = 0
        return AppendMessageResult(
            AppendMessageStatus.PUT_OK, phy, total, now, queue_offset, count,
            _now_ms() - now, self.store.store_host, sizes,
        )

    # An append session for direct appends (``rmq.store.append_run``), or None
    # when appends must go the general way now: ``open_run(with_index)``,
    # ``with_index`` when the run writes index keys into the current index file.
    open_run = open_run

    def fast_sys_flag(self, sys_flag: int, born_host: bytes) -> int:
        """sysFlag with the born/store host IPv6 bits of this put."""
        sys_flag &= ~(mc.BORNHOST_V6_FLAG | mc.STOREHOSTADDRESS_V6_FLAG)
        if len(born_host) == 20:
            sys_flag |= mc.BORNHOST_V6_FLAG
        if self.store_host_v6:
            sys_flag |= mc.STOREHOSTADDRESS_V6_FLAG
        return sys_flag

    def append_data(self, start_offset: int, data) -> bool:
        """HA slave: append replicated bytes at exactly ``start_offset``
        (records may arrive split across calls; files roll at file size)."""
        mv = memoryview(data)
        with self.put_lock:
            if start_offset != self.mfq.get_max_wrote_position():
                return False
            while len(mv):
                mf = self.mfq.get_last_mapped_file(start_offset, need_create=True)
                if mf is None:
                    return False
                room = self.file_size - mf.wrote_position
                n = min(room, len(mv))
                self.zero_ahead(mf)
                mf.target[mf.wrote_position : mf.wrote_position + n] = mv[:n]
                mf.wrote_position += n
                if mf.write_buffer is None:
                    mf.committed_position = mf.wrote_position
                mv = mv[n:]
                start_offset += n
        return True

    # --- reads ----------------------------------------------------------------------
    def get_data(self, offset: int, return_first_on_not_found: bool = False) -> tuple[memoryview, int] | None:
        """Readable bytes from ``offset`` to the end of its file: (view, offset)."""
        mf = self.mfq.find_mapped_file_by_offset(offset, return_first_on_not_found)
        if mf is None:
            return None
        pos = offset % self.file_size
        view = mf.select(pos)
        return (view, mf.file_from_offset + pos) if view is not None else None

    def get_message(self, offset: int, size: int) -> memoryview | None:
        mf = self.mfq.find_mapped_file_by_offset(offset, offset == 0)
        if mf is None:
            return None
        return mf.select(offset % self.file_size, size)

    def pickup_store_timestamp(self, offset: int, size: int) -> int:
        """Store timestamp of the record at ``offset`` (-1 if unreadable)."""
        if offset < self.get_min_offset():
            return -1
        mf = self.mfq.find_mapped_file_by_offset(offset)
        if mf is None:
            return -1
        pos = offset % self.file_size
        try:
            (sys_flag,) = _INT.unpack_from(mf.view, pos + 36)
            (ts,) = _LONG.unpack_from(mf.view, pos + 48 + (20 if sys_flag & 0x10 else 8))
        except (ValueError, struct.error):
            return -1
        return ts

    def delay_tags_code(self, store_ts: int, delay_text: str | None) -> int:
        """tagsCode of a SCHEDULE_TOPIC_XXXX entry: its delivery time."""
        try:
            level = int(delay_text) if delay_text else 0
        except ValueError:
            level = 0
        if level > self.max_delay_level:
            level = self.max_delay_level
        return store_ts + self.delay_table.get(level, 1000) if level > 0 else store_ts + 1000

    # --- recovery -------------------------------------------------------------------
    def _scan_from(self, idx: int, dispatch) -> int:
        """Scan records from file ``idx`` on; returns processOffset.  Each valid
        message goes to ``dispatch`` (abnormal recovery) when given."""
        files = self.mfq.mapped_files
        check = self.config.checkCRCOnRecover
        mf = files[idx]
        pos = 0
        while True:
            r = codec.scan_record(mf.view, pos, self.file_size, check)
            status = r[0]
            if status == codec.SCAN_MESSAGE:
                if dispatch is not None:
                    dispatch(r)
                pos += r[1]
            elif status == codec.SCAN_BLANK and idx + 1 < len(files):
                idx += 1
                mf = files[idx]
                pos = 0
            else:
                if status == codec.SCAN_CRC_ERROR:
                    log.warning("CRC check failed at physical offset %d; recovery stops there",
                                mf.file_from_offset + pos)
                elif status == codec.SCAN_SIZE_MISMATCH:
                    log.warning("corrupt record (size mismatch) at physical offset %d; recovery stops there",
                                mf.file_from_offset + pos)
                elif status == codec.SCAN_END and pos < self.file_size:
                    log.info("recover physics file end, %s pos=%d", mf.file_name, pos)
                break
        return mf.file_from_offset + pos

    def recover_normally(self, max_phy_of_cq: int) -> int:
        """STORE_FORMAT.md 9.3; returns the recovered end offset."""
        files = self.mfq.mapped_files
        if not files:
            self.mfq.flushed_where = self.mfq.committed_where = 0
            self.store.destroy_logics()
            return 0
        process = self._scan_from(max(0, len(files) - 3), None)
        self._truncate_to(process, max_phy_of_cq)
        return process

    def recover_abnormally(self, max_phy_of_cq: int, min_ts: int, dispatch, rebuild_from: int = -1) -> int:
        """STORE_FORMAT.md 9.4: start at the newest file whose first record is
        older than the checkpoint, re-dispatch everything from there.

        Deliberate difference from 4.9.8: when index files were dropped at
        load, the scan starts no later than the file holding the oldest
        offset they covered (``rebuild_from``), so every message stays
        indexed after a crash instead of only those after the checkpoint."""
        files = self.mfq.mapped_files
        if not files:
            self.mfq.flushed_where = self.mfq.committed_where = 0
            self.store.destroy_logics()
            return 0
        start = 0
        for i in range(len(files) - 1, -1, -1):
            r = codec.scan_record(files[i].view, 0, self.file_size, False)
            if r[0] == codec.SCAN_MESSAGE and r[7] != 0 and r[7] <= min_ts:
                start = i
                break
        if rebuild_from >= 0:
            for i, mf in enumerate(files[: start + 1]):
                if mf.file_from_offset + self.file_size > rebuild_from:
                    start = min(start, i)
                    break
        process = self._scan_from(start, dispatch)
        self._truncate_to(process, max_phy_of_cq)
        return process

    def _truncate_to(self, process: int, max_phy_of_cq: int) -> None:
        self.mfq.flushed_where = process
        self.mfq.committed_where = process
        self.mfq.truncate_dirty_files(process)
        if max_phy_of_cq >= process:
            log.warning("maxPhyOffsetOfConsumeQueue(%d) >= processOffset(%d), truncate dirty logic files",
                        max_phy_of_cq, process)
            self.store.truncate_dirty_logic_files(process)

    # --- life cycle -------------------------------------------------------------------
    def shutdown(self) -> None:
        self.allocator.shutdown()
        self.mfq.shutdown()

    def destroy(self) -> None:
        self.mfq.destroy()

