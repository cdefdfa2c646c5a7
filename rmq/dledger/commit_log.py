"""DLedgerCommitLog: the commit log on a DLedger group (4.9.8's
``DLedgerCommitLog``, with ``enableDLegerCommitLog=true``).

Each message is one DLedger entry whose body is the ordinary commit-log
record; the record's physical offset is where its body lies in the DLedger
data files (``entry pos + 48``), written into the record by an append hook, so
consume queues, the index and pulls work on those files as on a commit log.
Only the leader appends; a put's append result carries its quorum wait (a
future of its PutMessageStatus), and consume queues are built from committed
entries only (``get_max_offset`` is the committed position; the reput walks
the entries through ``dispatch_entries``, past each 48-byte header).

It lives beside the Raft library rather than in ``rmq/store`` because the
store is the lower layer: the broker's start-up hands this class to the store
(``DefaultMessageStore(commit_log=DLedgerCommitLog)``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import struct
from collections.abc import Callable

from rmq._fast import compiled
from rmq.common import message as mc
from rmq.dledger.config import DLedgerConfig
from rmq.dledger.entry import BLANK_MAGIC, BODY_OFFSET, Entry
from rmq.dledger.mmap_store import append_run
from rmq.dledger.protocol import Code, DLedgerError
from rmq.dledger.pusher import wait_quorum_then
from rmq.dledger.server import DLedgerServer
from rmq.store import message_codec as codec
from rmq.store.commit_log import CommitLog, _now_ms, batch_key_count
from rmq.store.config import BrokerRole
from rmq.store.message import MessageExtBatch, MessageExtBrokerInner
from rmq.store.reput import DispatchStalled, reput_walk
from rmq.store.results import AppendMessageResult, AppendMessageStatus, PutMessageStatus

log = logging.getLogger("store")

PHY_IN_RECORD = 4 + 4 + 4 + 4 + 4 + 8  # PHYSICALOFFSET's place in a record
_LONG = struct.Struct(">q")
BATCH_PUSH_SIZE = 64 * 1024
# the least of an entry file the flush thread keeps populated ahead of the appends
DATA_POPULATE_AHEAD_MIN = 4 * 1024 * 1024

# DLedger's answer -> the put status 4.9.8 reports for it
_STATUS = {
    Code.INCONSISTENT_LEADER: PutMessageStatus.SERVICE_NOT_AVAILABLE,
    Code.NOT_LEADER: PutMessageStatus.SERVICE_NOT_AVAILABLE,
    Code.LEADER_NOT_READY: PutMessageStatus.SERVICE_NOT_AVAILABLE,
    Code.DISK_FULL: PutMessageStatus.SERVICE_NOT_AVAILABLE,
    Code.WAIT_QUORUM_ACK_TIMEOUT: PutMessageStatus.OS_PAGECACHE_BUSY,
    Code.LEADER_PENDING_FULL: PutMessageStatus.OS_PAGECACHE_BUSY,
}


def dledger_config(cfg) -> DLedgerConfig:
    """The group's settings from MessageStoreConfig, as 4.9.8 derives them."""
    config = DLedgerConfig(
        group=cfg.dLegerGroup or "", self_id=cfg.dLegerSelfId or "", peers=cfg.dLegerPeers or "",
        store_base_dir=cfg.storePathRootDir, data_store_path=cfg.storePathDLedgerCommitLog,
        mapped_file_size_for_entry_data=cfg.mappedFileSizeCommitLog,
        preferred_leader_ids=cfg.preferredLeaderId or None,
        enable_batch_push=cfg.enableBatchPush,
        # 4.9.8 leaves DLedger's 4 KiB here, about three 1 KiB messages a push;
        # rmq fills a push with up to 64 KiB of entries (a Java follower takes
        # any size), so a busy leader sends one push per loop turn, not per 3
        max_batch_push_size=BATCH_PUSH_SIZE,
        # the broker's flush service flushes the entry files as it flushes a commit
        # log (flushIntervalCommitLog); the group's own loop then only needs to keep
        # the index and checkpoint in step, at the same pace
        flush_file_interval_ms=max(10, cfg.flushIntervalCommitLog))
    config.validate()
    return config


class _PutStatuses(dict):
    """The put status of each way a quorum wait ends: None (a quorum holds
    the entry) PUT_OK, DLedger's code the status 4.9.8 reports for it, any
    other code UNKNOWN_ERROR."""

    def __missing__(self, _code: int) -> PutMessageStatus:
        return PutMessageStatus.UNKNOWN_ERROR


# ``_put_status(code)``: a put's status once its quorum wait ended (the
# outcome of its wait), a lookup: the quorum check settles a read's group
# without a Python frame
_put_status: Callable[[int | None], PutMessageStatus] = \
    _PutStatuses({None: PutMessageStatus.PUT_OK, **_STATUS}).__getitem__


class _RecordWriter:
    """``append_in_place``'s writer of a lane's send (``append_plain``'s tuple):
    the record with its physical offset, in place."""

    __slots__ = ("send", "born", "now", "store_host")

    def __init__(self, send: tuple, born: bytes, now: int, store_host: bytes) -> None:
        self.send = send
        self.born = born
        self.now = now
        self.store_host = store_host

    def __call__(self, buf, at: int, phy: int) -> None:
        topic_b, queue_id, flag, queue_offset, sys_flag, born_ts, reconsume, body, props, \
            _size = self.send
        codec.write_record(buf, at, queue_id, flag, queue_offset, phy, sys_flag, born_ts,
                           self.born, self.now, self.store_host, reconsume, 0, body, topic_b,
                           props)


def plain_runs(sends: list[tuple], host_bits: int, table: dict[tuple[str, int], int],
               max_body: int, limit: int) -> tuple[list[tuple], list[tuple], list[int], int]:
    """A DLedger leader's plain sends of one read (``plain_sends``'
    readings) made into the rows ``write_entries`` writes, each with its
    queue offset (the next of ``table``, the (topic, queue id) -> next
    offset map, counting the sends before it): stops before the first send
    too big for ``max_body`` or for a data file (``limit``).  Returns (the
    rows, (topic, queue id, first queue offset, sends) per queue, each
    row's index keys, their sum).  (Its compiled twin is the C arrays of
    ``rmq._fast.dledger_append``'s ``plain_rows``.)"""
    offsets: dict[tuple[str, int], int] = {}
    runs: list[tuple] = []
    keys_of: list[int] = []
    for (_end, _code, _flag, _opaque, _stype, topic, queue_id, sys_flag, born_ts, mflag,
         reconsume, body, props, keys) in sends:
        topic_b = topic.encode()
        sys_flag |= host_bits
        size = codec.record_size(sys_flag, len(body), len(topic_b), len(props))
        if len(body) > max_body or size > max_body + 65536 or size > limit:
            break
        key = (topic, queue_id)
        queue_offset = offsets.get(key)
        if queue_offset is None:
            queue_offset = table.get(key, 0)
        offsets[key] = queue_offset + 1
        runs.append((topic_b, queue_id, mflag, queue_offset, sys_flag, born_ts, reconsume,
                     body, props, size))
        keys_of.append(keys)
    queues = [(key[0], key[1], table.get(key, 0), end - table.get(key, 0))
              for key, end in offsets.items()]
    return runs, queues, keys_of, sum(keys_of)


def plain_stored(entries: list[Entry], sends: list[tuple], runs: list[tuple],
                 table: dict[tuple[str, int], int],
                 body_offset: int) -> list[tuple[Entry, int, int, int]]:
    """The leading ``entries`` written for ``runs`` (``plain_runs``' rows of
    ``sends``): each send's queue offset taken in ``table``; returns (entry,
    the record's physical offset, queue offset, record size) per entry.
    (Compiled, ``c_append_plain`` sets ``table`` once per queue: the same
    entries in the same order.)"""
    out = []
    for entry, send, run in zip(entries, sends, runs, strict=False):
        table[(send[5], send[6])] = run[3] + 1
        out.append((entry, entry.pos + body_offset, run[3], run[9]))
    return out


_c = compiled("dledger_append")
if _c is not None:
    _c.bind_commit_log(_RecordWriter, DLedgerError)


def _patch_phy(entry: Entry, record: bytearray, body_at: int) -> None:
    """The append hook: the record's PHYSICALOFFSET is where its body lies."""
    _LONG.pack_into(record, body_at + PHY_IN_RECORD, entry.pos + body_at)


class DLedgerCommitLog(CommitLog):
    """The commit log of a broker with ``enableDLegerCommitLog``, handed to the
    store at start-up (``DefaultMessageStore(commit_log=DLedgerCommitLog)``)."""

    dispatch_on_commit = True  # the group's commit listener dispatches
    waits_for_quorum = True  # a put is answered once the group's quorum has it

    # ``quorum_wait(first, last, then)``: the quorum wait of the entries
    # ``first``..``last`` appended by ``append_plain`` (a lane's read),
    # ``then(status)`` once it ends, their PutMessageStatus -- the group's
    # ``wait_quorum_then`` bound to its pusher: one compiled call when built
    quorum_wait: Callable[[Entry, Entry, Callable[[PutMessageStatus], None]], None]

    def __init__(self, store) -> None:
        super().__init__(store)
        self.server.commit_listeners.append(self.reput_committed)
        self.quorum_wait = functools.partial(wait_quorum_then, self.server.pusher, _put_status)

    def _open_files(self, cfg) -> None:
        """The log is the group's entry data files; the group's own store
        appends to them (no allocator), and keeps zeros written ahead of
        its appends as a commit log's appender does (rmqZeroFillAheadEnable)."""
        self.server = DLedgerServer(dledger_config(cfg), own_store=False)
        self.dledger = self.server.store
        self.dledger.append_hooks.append(_patch_phy)
        self.zero_ahead_enabled = False  # (CommitLog's appends: not this log's)
        self.allocator = None
        self.mfq = self.dledger.data  # readers, flushes and cleaning see the entry files
        # the entry store's appends (leader's and follower's) zero ahead of
        # themselves: the flush thread's populating ahead of them
        # (MADV_POPULATE_WRITE, each fault a synchronous readahead racing the
        # appender's writes into the same file) cost ~2.5 µs a 1 KiB entry,
        # ten times the zeros' pwrite.  Off, the flush thread populates
        # ahead, from a few MiB and then twice a round's appends (no
        # allocator populates a new entry file before its first append)
        self.mfq.zero_ahead = cfg.rmqZeroFillAheadEnable
        self.mfq.populate_ahead_min = DATA_POPULATE_AHEAD_MIN
        self.file_size = self.mfq.mapped_file_size

    # --- offsets ----------------------------------------------------------------------
    def load(self) -> bool:
        try:
            self.dledger.startup()
        except DLedgerError as exc:
            log.error("load the DLedger commit log failed: %s", exc)
            return False
        return True

    def get_max_offset(self) -> int:
        """Readable = committed: consume queues only see what a quorum holds."""
        if self.dledger.committed_pos > 0:
            return self.dledger.committed_pos
        return max(0, self.get_min_offset())

    def get_min_offset(self) -> int:
        files = self.mfq.mapped_files  # (get_first_mapped_file's, inline: asked every reput)
        return files[0].file_from_offset if files else -1

    def get_data(self, offset: int, return_first_on_not_found: bool = False):
        """Committed bytes from ``offset`` to the end of its file: (view,
        offset).  The reput's case (the file holding ``offset`` found by its
        number, read to its write position) is read here in one call; any
        other goes through ``CommitLog.get_data``."""
        limit = self.dledger.committed_pos
        if offset >= limit:
            return None
        size = self.file_size
        files = self.mfq.mapped_files
        if files:
            i = offset // size - files[0].file_from_offset // size
            if 0 <= i < len(files):
                mf = files[i]
                start = mf.file_from_offset
                if mf.write_buffer is None and start <= offset < start + size:
                    pos = offset - start
                    end = mf.wrote_position
                    if pos >= end:
                        return None
                    if start + end > limit:
                        end = limit - start
                    try:
                        return mf.view[pos:end], offset
                    except ValueError:  # (unmapped: as select)
                        return None
        data = super().get_data(offset, return_first_on_not_found)
        if data is None:
            return None
        view, start = data
        if start + len(view) > limit:
            view = view[:limit - start]
        return view, start

    # the group's commit listener (``_reput_committed`` below, or its compiled twin)
    reput_committed: Callable[[DLedgerCommitLog, int], None]

    def recover_normally(self, max_phy_of_cq: int) -> int:
        return self._recover(max_phy_of_cq)

    def recover_abnormally(self, max_phy_of_cq: int, min_ts: int, dispatch,
                           rebuild_from: int = -1) -> int:
        return self._recover(max_phy_of_cq)

    def _recover(self, max_phy_of_cq: int) -> int:
        """The entry files recovered themselves at load; consume queues past
        their end are cut, and the reput rebuilds from the committed entries."""
        end = self.mfq.get_max_wrote_position()
        if max_phy_of_cq >= end:
            self.store.truncate_dirty_logic_files(end)
        return end

    # --- appends (the leader only) -----------------------------------------------------
    def _append_records(self, records: list[bytes]) -> tuple[Entry, asyncio.Future]:
        """Append each record as an entry: the last entry and the put's quorum
        wait, a future of its PutMessageStatus (entries commit in order: the
        last one's wait covers them all, and puts appended before the next
        push share it)."""
        first = self.dledger.ledger_end_index + 1
        entry = None
        for record in records:
            entry = self.dledger.append_as_leader(record)
        return entry, self.server.pusher.wait_quorum(entry, first, _put_status)

    def append_plain(self, sends: list[tuple], host_bits: int, born: bytes,
                     now: int) -> list[tuple[Entry, int, int, int]]:
        """Plain sends (``plain_sends``' readings, host bits aside) appended
        as ``put_message`` appends each (the same record in the same entry,
        the same dispatch room taken), for the leader's send lane: (entry,
        the record's physical offset, queue offset, record size) of the
        leading ones stored; the general path then stores or refuses the
        rest.  One call per read: each send's checks and queue offset, the
        dispatch room taken once per queue when no file has to be made for it
        (``DispatchRoom.reserve_covered``; else send by send, so that a full
        disk refuses the same sends), then the entries written together
        (``mmap_store.append_run``; one by one only where a file
        ends); ``now`` is the store timestamp.  The caller waits for the
        quorum (``quorum_wait``) and counts the puts.  The twin of
        ``rmq._fast.dledger_append``'s ``c_append_plain`` (which the send
        lane's compiled ``store_read`` calls in its place)."""
        table = self.topic_queue_table
        runs, queues, keys_of, key_count = plain_runs(sends, host_bits, table,
                                                      self.config.maxMessageSize,
                                                      self.file_size - 8 - BODY_OFFSET)
        # the dispatch room: once per queue when nothing has to be made, else send by send
        room = self.store.dispatch_room
        if not room.reserve_covered(queues, key_count):
            for n, (run, send, keys) in enumerate(zip(runs, sends, keys_of, strict=False)):
                if not room.reserve(send[5], send[6], run[3], 1, keys):
                    del runs[n:]
                    break
        store_host = self.store_host_field
        dledger = self.dledger
        entries: list[Entry] = []
        try:
            while len(entries) < len(runs):
                done = append_run(dledger, runs[len(entries):], born, store_host, now)
                if not done:  # a file to close or make first: this one the usual way
                    done = [dledger.append_in_place(runs[len(entries)][9],
                                                    _RecordWriter(runs[len(entries)], born,
                                                                  now, store_host))]
                entries += done
        except DLedgerError as exc:
            log.warning("DLedger append refused: %s", exc)
        except ValueError as exc:  # a send the writer refuses: nothing of it is in the files
            log.error("[BUG] DLedger lane append: %s", exc)
        return plain_stored(entries, sends, runs, table, BODY_OFFSET)

    def _status_of(self, exc: DLedgerError) -> AppendMessageResult:
        log.warning("DLedger append refused: %s", exc)
        return AppendMessageResult(AppendMessageStatus.UNKNOWN_ERROR)

    def put_message(self, msg: MessageExtBrokerInner) -> AppendMessageResult:
        prepared = self._prepare(msg, BODY_OFFSET)
        if type(prepared) is AppendMessageResult:
            return prepared
        topic, props, born, sys_flag, size = prepared
        body = msg.body
        tx = msg.sys_flag & mc.TRANSACTION_ROLLBACK_TYPE
        key = (msg.topic, msg.queue_id)
        counts = tx in (mc.TRANSACTION_NOT_TYPE, mc.TRANSACTION_COMMIT_TYPE)
        now = _now_ms()
        self.begin_time_in_lock = now
        try:
            queue_offset = self.topic_queue_table.get(key, 0) if counts else 0
            if not self.dispatch_room_for(msg, queue_offset, counts):
                return AppendMessageResult(AppendMessageStatus.NO_ROOM_FOR_DISPATCH)
            record = bytearray(size)
            codec.write_record(
                record, 0, msg.queue_id, msg.flag, queue_offset, 0, sys_flag,
                msg.born_timestamp, born, now, self.store_host_field, msg.reconsume_times,
                msg.prepared_transaction_offset, body, topic, props)
            try:
                entry, quorum = self._append_records([bytes(record)])
            except DLedgerError as exc:
                return self._status_of(exc)
            if counts:
                self.topic_queue_table[key] = queue_offset + 1
        finally:
            self.begin_time_in_lock = 0
        msg.store_timestamp = now
        msg.sys_flag = sys_flag
        return AppendMessageResult(AppendMessageStatus.PUT_OK, entry.pos + BODY_OFFSET, size, now,
                                   queue_offset, 1, _now_ms() - now, self.store.store_host,
                                   quorum=quorum)

    def put_messages(self, batch: MessageExtBatch) -> AppendMessageResult:
        """A batch is one entry per message (4.9.8 appends them one by one too);
        the answer's offset is the first message's."""
        prepared = self._prepare_batch(batch, BODY_OFFSET)
        if type(prepared) is AppendMessageResult:
            return prepared
        topic, batch_props, born, sys_flag, total, count = prepared
        sizes = codec.new_sizes_array(count)
        key = (batch.topic, batch.queue_id)
        now = _now_ms()
        self.begin_time_in_lock = now
        try:
            queue_offset = self.topic_queue_table.get(key, 0)
            if not self.store.dispatch_room.reserve(batch.topic, batch.queue_id, queue_offset,
                                                    count, batch_key_count(batch.body, batch_props)):
                return AppendMessageResult(AppendMessageStatus.NO_ROOM_FOR_DISPATCH)
            buf = bytearray(total)
            codec.write_batch(buf, 0, batch.body, batch.queue_id, sys_flag, batch.born_timestamp,
                              born, now, self.store_host_field, batch.reconsume_times, topic,
                              batch_props, queue_offset, 0, sizes)
            records, at = [], 0
            for n in sizes:
                records.append(bytes(buf[at:at + n]))
                at += n
            try:
                first = self.dledger.ledger_end_index + 1
                _entry, quorum = self._append_records(records)
            except DLedgerError as exc:
                return self._status_of(exc)
            self.topic_queue_table[key] = queue_offset + count
        finally:
            self.begin_time_in_lock = 0
        start = self.dledger.get(first).pos + BODY_OFFSET
        return AppendMessageResult(AppendMessageStatus.PUT_OK, start, total, now, queue_offset,
                                   count, _now_ms() - now, self.store.store_host, quorum=quorum)

    # --- not used with DLedger -----------------------------------------------------------
    def open_run(self, with_index: bool) -> None:
        return None  # every append is a DLedger entry: no direct appends

    def append_data(self, start_offset: int, data) -> bool:
        return False  # no HA stream: DLedger replicates

    entry_header = BODY_OFFSET

    def dispatch_entries(self, view, dispatch, run=None, pos: int = 0) -> tuple[int, bool]:
        """The reput's walk of a readable region from ``pos``: each record
        lies behind a 48-byte entry header; a blank ends the file (4.9.8's
        ``DLedgerCommitLog.checkMessageAndReturnSize``).  ``run`` (when
        given) dispatches the entries from a position in bulk and says where
        the walk goes on one by one.  Returns the position reached and
        whether a blank was met."""
        n = len(view)
        while pos + 8 <= n:
            if run is not None:
                pos = run(view, pos, n)
                if pos + 8 > n:
                    break
            if int.from_bytes(view[pos:pos + 4], "big", signed=True) == BLANK_MAGIC:
                return pos, True
            size = int.from_bytes(view[pos + 4:pos + 8], "big", signed=True)
            if size <= BODY_OFFSET or pos + size > n:
                break
            r = codec.scan_record(view, pos + BODY_OFFSET, pos + size, False)
            if r[0] == codec.SCAN_MESSAGE:
                try:
                    dispatch(r)
                except DispatchStalled:
                    return pos, False
            else:
                log.error("[BUG] DLedger entry of %d bytes holds no message", size)
            pos += size
        return pos, False

    def shutdown(self) -> None:
        self.dledger.shutdown()


def _reput_committed(cl: DLedgerCommitLog, _index: int) -> None:
    """``DLedgerCommitLog.reput_committed``, the group's commit listener: the
    store's reput of what is now committed.  The usual case -- the committed
    entries after ``reput_from_offset`` lie in one data file, bulk dispatch
    on -- is the compiled walk of them in one call (what ``do_reput`` comes
    to through ``get_max_offset``, ``get_min_offset``, ``get_data`` and
    ``_dispatch_region``; a slave's, a follower's, tells no arrival listener,
    as there); anything else, or a walk that stops before the committed end,
    goes on through ``do_reput``.  The twin
    of ``rmq._fast.store_dispatch.reput_committed``, which does the same
    without a Python frame (the reput lock taken at its OS lock, the data
    file walked in place)."""
    store = cl.store
    limit = cl.dledger.committed_pos
    files = cl.mfq.mapped_files
    if limit <= 0 or not files or not store._bulk_dispatch:
        store.do_reput()
        return
    with store._reput_lock:
        start = store.reput_from_offset
        if start >= limit:
            return
        first = files[0].file_from_offset
        i = start // cl.file_size - first // cl.file_size
        if start < first or i >= len(files) or files[i].write_buffer is not None:
            store.do_reput()
            return
        mf = files[i]
        base = mf.file_from_offset
        end = min(mf.wrote_position, limit - base)
        if start - base >= end:
            store.do_reput()
            return
        try:
            view = mf.view[start - base:end]
        except ValueError:  # (unmapped: as get_data, nothing to read)
            return
        try:
            pos = reput_walk(store, view, 0, end - start + base,
                             store.message_arriving_listener is not None and
                             store.config.brokerRole is not BrokerRole.SLAVE)
        finally:
            view.release()
        store.reput_from_offset = start + pos
        if start + pos < limit:
            store.do_reput()


_dispatch = compiled("store_dispatch")
if _dispatch is None:
    DLedgerCommitLog.reput_committed = _reput_committed
else:
    _dispatch.bind_reput(BrokerRole.SLAVE)
    DLedgerCommitLog.reput_committed = _dispatch.reput_committed
