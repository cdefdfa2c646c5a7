"""Reads of ``DefaultMessageStore``: ``getMessage`` for pulls, offset and
time lookups of consume queues, single records by physical offset, and
queries through the index.

A mixin of ``DefaultMessageStore``: reads share the store's tables and
configuration and are called on it by the broker's processors, so they stay
methods of the store while living in their own module.  Reads never copy a
message body: results hold memoryviews of the mapped commit log that the
caller releases (``GetMessageResult.release``).
"""

from __future__ import annotations

import logging
import struct
from array import array
from collections.abc import Callable

from rmq._fast import compiled
from rmq.store import message_codec as codec
from rmq.store.commit_log import CommitLog, _now_ms
from rmq.store.config import BrokerRole
from rmq.store.consume_queue import CQ_STORE_UNIT_SIZE, FILLER_SIZE, ConsumeQueue
from rmq.store.consume_queue_ext import is_ext_addr
from rmq.store.mapped_file import MappedFile, MappedFileQueue
from rmq.store.message import MessageExt
from rmq.store.multi_dispatch import LMQ_PREFIX, is_lmq
from rmq.store.results import GetMessageResult, GetMessageStatus, QueryMessageResult
from rmq.store.running_flags import NOT_READABLE_BIT

log = logging.getLogger("store")

_INT = struct.Struct(">i")
_CQ_ENTRY = struct.Struct(">qiq")

DONE = 0
NEED_FILE = 1
_FOUND, _NO_MATCHED, _REMOVING = 0, 1, 2
_SCAN_STATUS = {_FOUND: GetMessageStatus.FOUND, _NO_MATCHED: GetMessageStatus.NO_MATCHED_MESSAGE,
                _REMOVING: GetMessageStatus.MESSAGE_WAS_REMOVING}


class _QueueScan:
    """The walk over a consume queue's entries for one ``getMessage``.

    ``scan`` reads 20-byte entries (offset, size, tags code) from ``pos``:
    fillers and entries before ``next_phy_file_start`` are skipped, the walk
    stops when the batch is full (``isTheBatchFull`` of 4.9.8 with the
    in-memory or on-disk limits by the entry's distance from ``max_phy``),
    ``message_filter(tags_code)`` drops entries, and accepted records are
    gathered into runs: records back to back in the commit log (and in the
    queue) become one slice of the mapped file.  An entry outside the
    readable part of the file the caller passed stops the walk with
    NEED_FILE (``pending_offset``/``pending_size``); the caller finds the
    file and resumes, or calls ``skip_missing``.  One Python pass per entry:
    ``rmq._fast.store_read.QueueScan`` is its compiled twin (same attributes,
    same runs byte for byte).
    """

    __slots__ = ("offset", "max_nums", "max_phy", "memory_limit", "mem_bytes", "mem_count",
                 "disk_bytes", "disk_count", "max_bytes", "message_filter", "pos", "status",
                 "count", "total", "max_phy_pulling", "next_phy_file_start", "pending_offset",
                 "pending_size", "runs", "run_offsets", "run_counts", "_sizes")

    def __init__(self, offset: int, max_nums: int, max_phy: int, memory_limit: int,
                 mem_bytes: int, mem_count: int, disk_bytes: int, disk_count: int,
                 max_bytes: int, message_filter: Callable[[int], bool] | None) -> None:
        self.offset, self.max_nums, self.max_phy = offset, max_nums, max_phy
        self.memory_limit, self.max_bytes = memory_limit, max_bytes
        self.mem_bytes, self.mem_count = mem_bytes, mem_count
        self.disk_bytes, self.disk_count = disk_bytes, disk_count
        self.message_filter = message_filter
        self.pos = 0
        self.status = _NO_MATCHED
        self.count = self.total = self.max_phy_pulling = 0
        self.next_phy_file_start = -1
        self.pending_offset = self.pending_size = 0
        self.runs: list[memoryview] = []
        self.run_offsets: list[int] = []
        self.run_counts: list[int] = []
        self._sizes = array("i")

    def _full(self, size: int, off: int) -> bool:
        if self.total == 0 or self.count == 0:
            return False
        if self.max_nums <= self.count:
            return True
        if self.max_phy - off > self.memory_limit:
            limit_bytes, limit_count = self.disk_bytes, self.disk_count
        else:
            limit_bytes, limit_count = self.mem_bytes, self.mem_count
        if 0 <= self.max_bytes < limit_bytes:
            limit_bytes = self.max_bytes
        return self.total + size > limit_bytes or self.count > limit_count - 1

    def scan(self, cq, limit: int, file_view, file_start: int, readable_end: int) -> int:
        limit = min(limit, len(cq))
        limit -= limit % CQ_STORE_UNIT_SIZE
        pos = self.pos
        if pos < 0:
            raise ValueError("negative scan position")
        matches = self.message_filter
        run_start, run_end, run_first, run_count = 0, -1, 0, 0
        result = DONE
        entries = _CQ_ENTRY.iter_unpack(memoryview(cq)[pos:limit]) if pos < limit else ()
        for off, size, tags in entries:
            self.max_phy_pulling = off
            if size == FILLER_SIZE or 0 <= self.next_phy_file_start and off < self.next_phy_file_start:
                pos += CQ_STORE_UNIT_SIZE
                continue
            if self._full(size, off):
                break
            if matches is not None and not matches(tags):
                pos += CQ_STORE_UNIT_SIZE
                continue
            if not (file_view is not None and size >= 0 and off >= file_start
                    and off + size <= readable_end):
                self.pending_offset, self.pending_size = off, size
                result = NEED_FILE
                break
            index = self.offset + pos // CQ_STORE_UNIT_SIZE
            if off != run_end or index != run_first + run_count:
                if run_end >= 0:
                    self._close_run(file_view, file_start, run_start, run_end, run_first, run_count)
                run_start, run_first, run_count = off, index, 0
            run_end = off + size
            run_count += 1
            self._sizes.append(size)
            self.count += 1
            self.total += size
            self.status = _FOUND
            self.next_phy_file_start = -1
            pos += CQ_STORE_UNIT_SIZE
        if run_end >= 0:
            self._close_run(file_view, file_start, run_start, run_end, run_first, run_count)
        self.pos = pos
        return result

    def _close_run(self, file_view, file_start: int, start: int, end: int, first: int,
                   n: int) -> None:
        self.runs.append(file_view[start - file_start:end - file_start])
        self.run_offsets.append(first)
        self.run_counts.append(n)

    def skip_missing(self, next_file_start: int) -> None:
        if self.count == 0:
            self.status = _REMOVING
        self.next_phy_file_start = next_file_start
        self.pos += CQ_STORE_UNIT_SIZE

    def sizes(self) -> array:
        return array("i", self._sizes)


def ext_resolving_filter(cq: ConsumeQueue, message_filter: Callable[[int], bool]
                         ) -> Callable[[int], bool]:
    """The consume-queue filter of a queue with ext files: an entry's tags field
    may be an ext address, which is resolved to its unit first (as 4.9.8's
    ``getMessage``).  A filter with a ``matches_unit(tags_code, unit)`` method
    (the SQL92 bitmap filter) is given the unit; a plain one the unit's tags
    code.  A unit that cannot be read is logged and matches everything: the
    commit-log side filters it later."""
    ext = cq.ext
    by_unit = getattr(message_filter, "matches_unit", None)

    def matches(tags: int) -> bool:
        if not is_ext_addr(tags):
            return by_unit(tags, None) if by_unit is not None else message_filter(tags)
        unit = ext.get(tags)
        if unit is None:
            log.error("[BUG] can't find consume queue extend file content!addr=%d, %s-%d", tags,
                      cq.topic, cq.queue_id)
            return by_unit(None, None) if by_unit is not None else True
        return by_unit(unit.tags_code, unit) if by_unit is not None else message_filter(unit.tags_code)

    return matches


def _read_queue(reader, cq: ConsumeQueue, result: GetMessageResult, offset: int, max_nums: int,
                max_bytes: int | None, message_filter, max_phy: int) -> None:
    """The FOUND / NO_MATCHED / REMOVING / FOUND_NULL part of ``getMessage``:
    walk ``cq`` from ``offset`` (a ``QueueScan``), looking the commit-log
    file of each run up once, into ``result``.  ``message_filter`` already
    resolves ext addresses.  Pure-Python twin of
    ``rmq._fast.store_read.read_queue``."""
    buf = cq.get_index_buffer(offset)
    if buf is None:
        result.status = GetMessageStatus.OFFSET_FOUND_NULL
        per_file = cq.file_size // CQ_STORE_UNIT_SIZE
        result.next_begin_offset = reader._next_offset_correction(
            offset, offset + per_file - offset % per_file)
        return
    view, _ = buf
    cfg = reader.config
    memory_limit = reader._memory_limit
    scan = QueueScan(offset, max_nums, max_phy, memory_limit,
                     cfg.maxTransferBytesOnMessageInMemory, cfg.maxTransferCountOnMessageInMemory,
                     cfg.maxTransferBytesOnMessageInDisk, cfg.maxTransferCountOnMessageInDisk,
                     -1 if max_bytes is None else max_bytes, message_filter)
    limit = min(len(view), max(16000, max_nums * CQ_STORE_UNIT_SIZE))
    commit_log = reader.commit_log
    file_view, file_start, readable_end = None, 0, 0
    try:
        while scan.scan(view, limit, file_view, file_start, readable_end) == NEED_FILE:
            off, size = scan.pending_offset, scan.pending_size
            if file_view is not None:
                file_view.release()  # the runs cut from it stay valid
                file_view = None
            found = commit_log.readable_file(off, size)
            if found is None:
                scan.skip_missing(commit_log.roll_next_file(off))
            else:
                file_view, file_start = found
                readable_end = file_start + len(file_view)
    finally:
        view.release()
        if file_view is not None:
            file_view.release()
    result.body_views = scan.runs
    result.run_offsets = scan.run_offsets
    result.run_counts = scan.run_counts
    result.sizes = scan.sizes()
    result.buffer_total_size = scan.total
    result.status = _SCAN_STATUS[scan.status]
    result.next_begin_offset = offset + scan.pos // CQ_STORE_UNIT_SIZE
    result.disk_fall_behind = max_phy - scan.max_phy_pulling
    result.suggest_pulling_from_slave = result.disk_fall_behind > memory_limit


class MessageReaderMixin:
    """Read half of ``DefaultMessageStore`` (see the module docstring)."""

    def _next_offset_correction(self, old: int, new: int) -> int:
        if self.config.brokerRole is not BrokerRole.SLAVE or self.config.offsetCheckInSlave:
            return new
        return old

    def get_message(
        self, group: str, topic: str, queue_id: int, offset: int, max_msg_nums: int,
        max_total_msg_size: int | None = None, message_filter: Callable[[int], bool] | None = None,
    ) -> GetMessageResult | None:
        """Messages of topic/queue from logical ``offset`` (``getMessage`` of
        4.9.8); None when the store is shut down or not readable."""
        begin = _now_ms()
        result = self.read_messages(group, topic, queue_id, offset, max_msg_nums,
                                    max_total_msg_size, message_filter)
        if result is not None:
            self.count_get(result, begin)
        return result

    def count_get(self, result: GetMessageResult, begin_ms: int) -> None:
        """The store's statistics of one ``getMessage`` that began at
        ``begin_ms`` (found / missed, messages handed out, slowest read)."""
        self.stats.on_get(result.message_count, _now_ms() - begin_ms)

    def read_messages(
        self, group: str, topic: str, queue_id: int, offset: int, max_msg_nums: int,
        max_total_msg_size: int | None = None, message_filter: Callable[[int], bool] | None = None,
    ) -> GetMessageResult | None:
        """``get_message`` without counting it: a reader that may discard what
        it read and let ``get_message`` read it again (the broker's pull lane
        takes only found reads) counts the reads it keeps with ``count_get``,
        so the statistics see every getMessage exactly once."""
        if self._shutdown or not self.running_flags.is_readable():
            return None
        if is_lmq(topic) and self.lmq_queue_num_exceeded():
            log.warning("message store is not available, broker config enableLmq and enableMultiDispatch, "
                        "lmq consumeQueue num exceed maxLmqConsumeQueueNum config num")
            return None
        result = GetMessageResult()
        max_phy = self.commit_log.get_max_offset()
        cq = self._existing_cq(topic, queue_id)
        if cq is None:
            result.status = GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
            result.next_begin_offset = self._next_offset_correction(offset, 0)
            return result
        min_off = cq.get_min_offset_in_queue()
        max_off = cq.get_max_offset_in_queue()
        result.min_offset, result.max_offset = min_off, max_off
        if max_off == 0:
            result.status = GetMessageStatus.NO_MESSAGE_IN_QUEUE
            result.next_begin_offset = self._next_offset_correction(offset, 0)
        elif offset < min_off:
            result.status = GetMessageStatus.OFFSET_TOO_SMALL
            result.next_begin_offset = self._next_offset_correction(offset, min_off)
        elif offset == max_off:
            result.status = GetMessageStatus.OFFSET_OVERFLOW_ONE
            result.next_begin_offset = self._next_offset_correction(offset, offset)
        elif offset > max_off:
            result.status = GetMessageStatus.OFFSET_OVERFLOW_BADLY
            result.next_begin_offset = self._next_offset_correction(offset, min_off if min_off == 0 else max_off)
        else:
            if cq.ext is not None and message_filter is not None:
                message_filter = ext_resolving_filter(cq, message_filter)
            read_queue(self, cq, result, offset, max_msg_nums, max_total_msg_size, message_filter,
                       max_phy)
        return result

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self._existing_cq(topic, queue_id)
        return cq.get_max_offset_in_queue() if cq is not None else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self._existing_cq(topic, queue_id)
        return cq.get_min_offset_in_queue() if cq is not None else -1

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, offset: int) -> int:
        cq = self._existing_cq(topic, queue_id)
        entry = cq.read_entry(offset) if cq is not None else None
        return entry[0] if entry is not None else 0

    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, offset: int) -> bool:
        """``checkInDiskByConsumeOffset``: whether the message at ``offset`` of
        the queue lies further behind the commit log's end than the share of
        memory a read may count on (accessMessageInMemoryMaxRatio); False when
        the queue or the entry does not exist."""
        cq = self._existing_cq(topic, queue_id)
        entry = cq.read_entry(offset) if cq is not None else None
        if entry is None:
            return False
        return self.commit_log.get_max_offset() - entry[0] > self._memory_limit

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        cq = self._existing_cq(topic, queue_id)
        if cq is None:
            return 0
        return cq.get_offset_in_queue_by_time(timestamp, self.commit_log.pickup_store_timestamp)

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        cq = self._existing_cq(topic, queue_id)
        entry = cq.read_entry(offset) if cq is not None else None
        if entry is None or entry[1] == FILLER_SIZE:
            return -1
        return self.commit_log.pickup_store_timestamp(entry[0], entry[1])

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        cq = self._existing_cq(topic, queue_id)
        if cq is None:
            return -1
        return self.get_message_store_timestamp(topic, queue_id, cq.get_min_offset_in_queue())

    def get_earliest_message_time_store(self) -> int:
        """Store time of the first record in the commit log (-1 if none)."""
        min_off = self.commit_log.get_min_offset()
        return self.commit_log.pickup_store_timestamp(min_off, 0) if min_off >= 0 else -1

    def select_one_message_by_offset(self, phy_offset: int, size: int | None = None) -> memoryview | None:
        if size is None:
            head = self.commit_log.get_message(phy_offset, 4)
            if head is None:
                return None
            (size,) = _INT.unpack_from(head, 0)
            head.release()
            if size <= 0:
                return None
        return self.commit_log.get_message(phy_offset, size)

    def look_message_by_offset(self, phy_offset: int) -> MessageExt | None:
        mv = self.select_one_message_by_offset(phy_offset)
        if mv is None:
            return None
        try:
            return codec.decode_message(mv)
        except ValueError:
            return None
        finally:
            mv.release()

    def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryMessageResult:
        """Messages whose UNIQ_KEY or KEYS token is ``key`` stored in
        [begin, end] (hash matches; callers re-check the key)."""
        result = QueryMessageResult()
        if self.index_service is None:
            return result
        offsets, last_ts, last_phy = self.index_service.query_offset(topic, key, max_num, begin, end)
        result.index_last_update_timestamp = last_ts
        result.index_last_update_phyoffset = last_phy
        for off in offsets:
            mv = self.select_one_message_by_offset(off)
            if mv is not None:
                result.message_buffers.append(mv)
                result.buffer_total_size += len(mv)
        return result

    def query_message_by_unique_key(self, topic: str, uniq_key: str) -> MessageExt | None:
        """The newest message of ``topic`` whose UNIQ_KEY is ``uniq_key``."""
        res = self.query_message(topic, uniq_key, self.config.defaultQueryMaxNum, 0, 2**63 - 1)
        try:
            for mv in res.message_buffers:
                msg = codec.decode_message(mv)
                if msg.topic == topic and msg.uniq_key == uniq_key:
                    return msg
        finally:
            res.release()


# the twins by default; the compiled ones replace them when built
QueueScan = _QueueScan
read_queue = _read_queue
_read_messages = MessageReaderMixin.read_messages
_get_message = MessageReaderMixin.get_message

_c = compiled("store_read")
if _c is not None:
    QueueScan = _c.QueueScan
    read_queue = _c.read_queue
    _c.bind(GetMessageResult, NOT_READABLE_BIT, LMQ_PREFIX, _read_messages, CommitLog,
            ConsumeQueue, MappedFileQueue, MappedFile)
    # a read's positions without calls; the twins read what they leave
    MessageReaderMixin.read_messages = _c.read_messages  # type: ignore[method-assign]
    MessageReaderMixin.get_message = _c.get_message  # type: ignore[method-assign]
