"""Result types of puts, gets and queries (``PutMessageResult``,
``AppendMessageResult``, ``GetMessageResult``, ``QueryMessageResult`` and
their status enums in 4.9.8)."""

from __future__ import annotations

import asyncio
import enum
from array import array
from dataclasses import dataclass, field

from rmq.common.get_message_status import GetMessageStatus as GetMessageStatus
from rmq.common.message_id import socket_address_bytes

_HOST_HEX: dict[tuple[str, int], str] = {}


def msg_id_host_hex(store_host: tuple[str, int]) -> str:
    """Upper-case hex of the store host field, the constant head of every
    offset message id of a broker (parsing the address per message was the
    cost)."""
    head = _HOST_HEX.get(store_host)
    if head is None:
        if len(_HOST_HEX) > 64:
            _HOST_HEX.clear()
        head = _HOST_HEX[store_host] = socket_address_bytes(store_host).hex().upper()
    return head


def offset_msg_id(store_host: tuple[str, int], offset: int) -> str:
    """``create_message_id`` with the host part cached: host hex + 16 hex
    digits of the commit log offset."""
    return msg_id_host_hex(store_host) + (offset & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "big").hex().upper()


class PutMessageStatus(enum.Enum):
    PUT_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3
    SERVICE_NOT_AVAILABLE = 4
    CREATE_MAPEDFILE_FAILED = 5
    MESSAGE_ILLEGAL = 6
    PROPERTIES_SIZE_EXCEEDED = 7
    OS_PAGECACHE_BUSY = 8
    UNKNOWN_ERROR = 9
    LMQ_CONSUME_QUEUE_NUM_EXCEEDED = 10
    # RocketMQ 5 timer messages (rmq/store/timer/hook.py)
    WHEEL_TIMER_FLOW_CONTROL = 13
    WHEEL_TIMER_MSG_ILLEGAL = 14
    WHEEL_TIMER_NOT_ENABLE = 15


class AppendMessageStatus(enum.Enum):
    PUT_OK = 0
    END_OF_FILE = 1
    MESSAGE_SIZE_EXCEEDED = 2
    PROPERTIES_SIZE_EXCEEDED = 3
    UNKNOWN_ERROR = 4
    # rmq: a file the message's dispatch needs could not be made (DispatchRoom)
    NO_ROOM_FOR_DISPATCH = 5


@dataclass(slots=True)
class AppendMessageResult:
    """Where a single message or a whole batch landed.

    For batches ``sizes`` holds every record's size so that the comma-joined
    offset message ids are only built when someone asks for ``msg_id``.
    """

    status: AppendMessageStatus
    wrote_offset: int = 0
    wrote_bytes: int = 0
    store_timestamp: int = 0
    logics_offset: int = 0
    msg_num: int = 1
    page_cache_rt: int = 0
    store_host: tuple[str, int] = ("127.0.0.1", 0)
    sizes: array | None = None
    _msg_id: str | None = None
    # a commit log that replicates before it acknowledges (DLedger's): the future
    # of the put's PutMessageStatus once a quorum holds it (or failed to)
    quorum: asyncio.Future | None = None

    @property
    def msg_id(self) -> str:
        if self._msg_id is None:
            if self.status is not AppendMessageStatus.PUT_OK:
                return ""
            if self.sizes is None:
                self._msg_id = offset_msg_id(self.store_host, self.wrote_offset)
            else:
                head = msg_id_host_hex(self.store_host)
                ids = []
                off = self.wrote_offset
                for size in self.sizes:
                    ids.append(head + off.to_bytes(8, "big").hex().upper())
                    off += size
                self._msg_id = ",".join(ids)
        return self._msg_id

    def is_ok(self) -> bool:
        return self.status is AppendMessageStatus.PUT_OK


@dataclass(slots=True)
class PutMessageResult:
    status: PutMessageStatus
    append_result: AppendMessageResult | None = None
    remark: str = ""  # why a put was refused, when the status alone does not say it

    def is_ok(self) -> bool:
        return self.append_result is not None and self.append_result.is_ok()


@dataclass(slots=True)
class GetMessageResult:
    """Messages found by ``get_message``: memoryviews into the mapped files.

    The records are held as *runs*: ``body_views`` are slices of the mapped
    commit log, one per stretch of records lying back to back (a pull of
    messages written together is a single slice), which is what a pull
    response sends.  ``sizes`` are the records' sizes in order,
    ``run_offsets`` the queue offset of each run's first record and
    ``run_counts`` its number of records (records of a run have consecutive
    queue offsets); the per-message views and queue offsets are derived from
    them only when asked for.
    """

    status: GetMessageStatus = GetMessageStatus.NO_MESSAGE_IN_QUEUE
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    body_views: list[memoryview] = field(default_factory=list)
    run_offsets: list[int] = field(default_factory=list)
    run_counts: list[int] = field(default_factory=list)
    sizes: array = field(default_factory=lambda: array("i"))
    buffer_total_size: int = 0
    suggest_pulling_from_slave: bool = False
    # bytes of commit log after the last entry the pull read (-1: none read);
    # GROUP_GET_FALL_SIZE of 4.9.8's diskFallRecorded
    disk_fall_behind: int = -1
    msg_count4_commercial: int = 0
    _buffers: list[memoryview] | None = None

    @property
    def message_count(self) -> int:
        return len(self.sizes)

    @property
    def message_buffers(self) -> list[memoryview]:
        """One view per record (cut out of the runs on first use)."""
        if self._buffers is None:
            out: list[memoryview] = []
            sizes = iter(self.sizes)
            for run, n in zip(self.body_views, self.run_counts, strict=True):
                pos = 0
                for _ in range(n):
                    size = next(sizes)
                    out.append(run[pos:pos + size])
                    pos += size
            self._buffers = out
        return self._buffers

    @property
    def message_queue_offsets(self) -> list[int]:
        """Queue offset of every record, in order."""
        out: list[int] = []
        for first, n in zip(self.run_offsets, self.run_counts, strict=True):
            out.extend(range(first, first + n))
        return out

    def release(self) -> None:
        """Drop the views so the mapped files can be unmapped when deleted."""
        if self._buffers is not None:
            for mv in self._buffers:
                mv.release()
            self._buffers = None
        for mv in self.body_views:
            mv.release()
        self.body_views.clear()
        self.run_offsets.clear()
        self.run_counts.clear()
        self.sizes = array("i")


@dataclass(slots=True)
class QueryMessageResult:
    message_buffers: list[memoryview] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0
    buffer_total_size: int = 0

    def release(self) -> None:
        for mv in self.message_buffers:
            mv.release()
        self.message_buffers.clear()
