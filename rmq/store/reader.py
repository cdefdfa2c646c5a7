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

import struct
from collections.abc import Callable

from rmq.store import message_codec as codec
from rmq.store.commit_log import _now_ms
from rmq.store.config import BrokerRole
from rmq.store.consume_queue import CQ_STORE_UNIT_SIZE, FILLER_SIZE, ConsumeQueue
from rmq.store.message import MessageExt
from rmq.store.results import GetMessageResult, GetMessageStatus, QueryMessageResult

_INT = struct.Struct(">i")
_CQ_ENTRY = struct.Struct(">qiq")


class MessageReaderMixin:
    """Read half of ``DefaultMessageStore`` (see the module docstring)."""

    def _next_offset_correction(self, old: int, new: int) -> int:
        if self.config.brokerRole is not BrokerRole.SLAVE or self.config.offsetCheckInSlave:
            return new
        return old

    def _is_the_batch_full(self, size: int, max_nums: int, total: int, count: int, in_disk: bool,
                           max_bytes: int | None) -> bool:
        if total == 0 or count == 0:
            return False
        if max_nums <= count:
            return True
        cfg = self.config
        if in_disk:
            limit_bytes = cfg.maxTransferBytesOnMessageInDisk
            limit_count = cfg.maxTransferCountOnMessageInDisk
        else:
            limit_bytes = cfg.maxTransferBytesOnMessageInMemory
            limit_count = cfg.maxTransferCountOnMessageInMemory
        if max_bytes is not None:
            limit_bytes = min(limit_bytes, max_bytes)
        return total + size > limit_bytes or count > limit_count - 1

    def get_message(
        self, group: str, topic: str, queue_id: int, offset: int, max_msg_nums: int,
        max_total_msg_size: int | None = None, message_filter: Callable[[int], bool] | None = None,
    ) -> GetMessageResult | None:
        """Messages of topic/queue from logical ``offset`` (``getMessage`` of
        4.9.8); None when the store is shut down or not readable."""
        if self._shutdown or not self.running_flags.is_readable():
            return None
        begin = _now_ms()
        result = GetMessageResult()
        max_phy = self.commit_log.get_max_offset()
        cq = self._existing_cq(topic, queue_id)
        if cq is None:
            result.status = GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
            result.next_begin_offset = self._next_offset_correction(offset, 0)
            self.stats.on_get(0, _now_ms() - begin)
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
            self._read_queue(cq, result, offset, max_msg_nums, max_total_msg_size, message_filter, max_phy)
        self.stats.on_get(len(result.message_buffers), _now_ms() - begin)
        return result

    def _read_queue(self, cq: ConsumeQueue, result: GetMessageResult, offset: int, max_nums: int,
                    max_bytes: int | None, message_filter, max_phy: int) -> None:
        buf = cq.get_index_buffer(offset)
        if buf is None:
            result.status = GetMessageStatus.OFFSET_FOUND_NULL
            per_file = cq.file_size // CQ_STORE_UNIT_SIZE
            result.next_begin_offset = self._next_offset_correction(offset, offset + per_file - offset % per_file)
            return
        view, _ = buf
        status = GetMessageStatus.NO_MATCHED_MESSAGE
        next_phy_file_start = -1
        max_phy_pulling = 0
        limit = min(len(view), max(16000, max_nums * CQ_STORE_UNIT_SIZE))
        limit -= limit % CQ_STORE_UNIT_SIZE
        buffers = result.message_buffers
        queue_offsets = result.message_queue_offsets
        commit_log = self.commit_log
        memory_limit = self._memory_limit
        total = 0
        i = 0
        mf = None
        mf_start = mf_end = 0
        file_size = commit_log.file_size
        try:
            for off, size, tags in _CQ_ENTRY.iter_unpack(view[:limit]):
                max_phy_pulling = off
                if size == FILLER_SIZE or (next_phy_file_start >= 0 and off < next_phy_file_start):
                    i += CQ_STORE_UNIT_SIZE
                    continue
                in_disk = max_phy - off > memory_limit
                if self._is_the_batch_full(size, max_nums, total, len(buffers), in_disk, max_bytes):
                    break
                if message_filter is not None and not message_filter(tags):
                    i += CQ_STORE_UNIT_SIZE
                    continue
                if mf_start <= off and off + size <= mf_end:
                    mv = mf.select(off - mf_start, size)
                else:
                    mf = commit_log.mfq.find_mapped_file_by_offset(off)
                    mv = None
                    if mf is not None:
                        mf_start = mf.file_from_offset
                        mf_end = mf_start + file_size
                        mv = mf.select(off - mf_start, size)
                    else:
                        mf_start = mf_end = 0
                if mv is None:
                    if not buffers:
                        status = GetMessageStatus.MESSAGE_WAS_REMOVING
                    next_phy_file_start = commit_log.roll_next_file(off)
                    i += CQ_STORE_UNIT_SIZE
                    continue
                buffers.append(mv)
                queue_offsets.append(offset + i // CQ_STORE_UNIT_SIZE)
                total += size
                status = GetMessageStatus.FOUND
                next_phy_file_start = -1
                i += CQ_STORE_UNIT_SIZE
        finally:
            view.release()
        result.buffer_total_size = total
        result.status = status
        result.next_begin_offset = offset + i // CQ_STORE_UNIT_SIZE
        result.suggest_pulling_from_slave = max_phy - max_phy_pulling > memory_limit

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
