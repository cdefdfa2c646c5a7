"""The store's append session: one acquisition of the put locks for one or
more plain appends written straight into the current files.

The broker's send lane (a whole read of sends) and the store's single put
(``put_single``, which the timer's delivery uses) store records when nothing
unusual stands in the way, and do in one go what ``CommitLog.put_message``
and the dispatch of the record would do.  ``CommitLog.open_run`` decides
whether that may happen now (a plainly writable master store, the commit
log's tail is the next thing to dispatch, the current index file is
usable), takes the put lock and the dispatch (reput) lock and hands out an
``AppendRun``: the current commit-log file and its buffer, the write
position, the limits, the index buffer, and the tails of the consume
queues the run stores into (``RunQueue``).  Callers write records at
``run.wrote`` (the Python writers here, or compiled ones on the same
buffers), account for them with ``advance``, and ``close`` the run: the
queues' tails and offsets (``publish_queue``; the compiled send lane
sets the same fields of the queues it kept itself), the commit log's write
position, the checkpoint and the dispatch position (``publish``) are
published together under the locks, which ``release`` then lets go.  A run
that stored nothing publishes nothing.

Everything here runs on the loop's thread without blocking, so other
threads never observe a run half done; the general put's
``begin_time_in_lock`` bracket is left out.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from rmq.common.topics import SCHEDULE_TOPIC
from rmq.store.batch_append import append_batch
from rmq.store.config import BrokerRole
from rmq.store.index import index_keys
from rmq.store.single_put import append_single

if TYPE_CHECKING:
    from rmq.store.commit_log import CommitLog
    from rmq.store.consume_queue import ConsumeQueue
    from rmq.store.mapped_file import MappedFile

CQ_UNIT = 20


def now_ms() -> int:
    """The store time of a record appended now."""
    return time.time_ns() // 1_000_000


class RunQueue:
    """One consume queue a run stores into: its tail as loaded when the run
    first met it (``cq``, ``cmf``, ``cpos``, ``qoff``, ``maxphy``) and what
    the run adds: ``nums`` messages of ``size`` bytes in ``events`` puts (a
    batch is one).  ``each`` lists (next offset, tagsCode, store time,
    messages, size) per put when the caller asked for every one (``exact``:
    the arrival listeners must hear of each)."""

    __slots__ = ("topic", "queue_id", "cq", "cmf", "cpos", "cfrom", "csize", "qoff", "maxphy",
                 "nums", "events", "size", "tags", "store_ts", "each")

    def __init__(self, topic: str, queue_id: int, cq: ConsumeQueue, cmf: MappedFile, qoff: int,
                 exact: bool) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.cq = cq
        self.cmf = cmf
        self.cpos = cmf.wrote_position
        self.cfrom = cmf.file_from_offset
        self.csize = cq.file_size
        self.qoff = qoff
        self.maxphy = cq.max_physic_offset
        self.nums = 0
        self.events = 0
        self.size = 0
        self.tags = 0
        self.store_ts = 0
        self.each: list | None = [] if exact else None

    def slot_free(self, phy: int, nums: int) -> bool:
        """Room for ``nums`` entries in the queue's current file, and the record
        at ``phy`` is the queue's next (so record and entries go in at once)."""
        return self.cpos < self.csize and self.cpos + nums * CQ_UNIT <= len(self.cmf.view) and \
            self.cfrom + self.cpos == self.qoff * CQ_UNIT and phy >= self.maxphy

    def summary(self) -> tuple:
        """(topic, queue id, next queue offset, last tagsCode, last store time,
        messages, bytes, puts, each put or None): what statistics and
        arrival notices need of the run's puts into this queue."""
        return (self.topic, self.queue_id, self.qoff, self.tags, self.store_ts, self.nums,
                self.size, self.events, self.each)


class AppendRun:
    """An append session (``CommitLog.open_run``, which arms the commit log's
    one run: after ``close`` or ``release`` it is not used again by whoever
    opened it); see the module docstring.  Fields the writers use: ``buffer`` (the current commit-log
    file's write target), ``wrote`` (the append position in it, moved by
    ``advance``), ``file_from`` (the file's start offset), ``limit`` (the
    last position a record may end at), ``max_body`` (maxMessageSize),
    ``index`` / ``slots`` / ``entries`` (the current index file's buffer
    and layout; ``index`` None when the run writes no index keys),
    ``store_host`` (the stored host field), ``host_hex`` (the message-id
    prefix) and ``store_ts`` (the last record's store time)."""

    __slots__ = ("commit_log", "store", "mf", "buffer", "start", "wrote", "file_from", "limit",
                 "max_body", "index", "slots", "entries", "store_host", "host_hex", "store_ts",
                 "_open")

    def __init__(self, commit_log: CommitLog) -> None:
        self.commit_log = commit_log
        self.store = commit_log.store
        self.mf = self.buffer = self.index = None
        self.start = self.wrote = self.file_from = self.limit = self.max_body = 0
        self.slots = self.entries = self.store_ts = 0
        self.store_host = commit_log.store_host_field
        self.host_hex = commit_log.msg_id_prefix
        self._open = False

    def arm(self, mf: MappedFile, index: Any, slots: int, entries: int) -> AppendRun:
        """Open the session on ``mf`` (``open_run``, under the locks it just
        took).  A commit log has one run, armed again for each session: the
        put lock lets one session be open at a time, and a read of sends
        opens one, so the run's fields are set, not a new object made."""
        cl = self.commit_log
        self.mf = mf
        self.buffer = mf.target
        self.start = self.wrote = mf.wrote_position
        self.file_from = mf.file_from_offset
        self.limit = cl.file_size - 8
        self.max_body = cl.config.maxMessageSize
        self.index = index
        self.slots = slots
        self.entries = entries
        self.store_host = cl.store_host_field
        self.host_hex = cl.msg_id_prefix
        self.store_ts = 0
        self._open = True
        return self

    @property
    def phy(self) -> int:
        """The commit-log offset the next record goes to."""
        return self.file_from + self.wrote

    def queue(self, topic: str, queue_id: int, exact: bool = False) -> RunQueue | None:
        """The tail of an existing consume queue the run may store into, or
        None (the general put handles it): not made yet, keeping ext units
        (their entries hold ext addresses), never written since load, or
        SCHEDULE_TOPIC_XXXX."""
        if topic == SCHEDULE_TOPIC:
            return None
        qs = self.store.consume_queue_table.get(topic)
        cq = qs.get(queue_id) if qs is not None else None
        if cq is None or cq.ext is not None:
            return None
        cmf = cq.tail_file
        if cmf is None:
            return None
        return RunQueue(topic, queue_id, cq, cmf,
                        self.commit_log.topic_queue_table.get((topic, queue_id), 0), exact)

    def index_full(self, keys: int) -> bool:
        """Whether ``keys`` more entries would not fit into the index file."""
        if self.index is None:
            return False
        used = int.from_bytes(self.index[36:40], "big", signed=True)
        return max(1, used) + keys > self.entries

    def advance(self, q: RunQueue, nums: int, size: int, tags: int, now: int) -> None:
        """Account for ``nums`` records of ``size`` bytes written at ``wrote``
        with their consume-queue entries at ``q``'s tail."""
        self.wrote += size
        q.cpos += nums * CQ_UNIT
        q.qoff += nums
        q.maxphy = self.file_from + self.wrote
        q.nums += nums
        q.events += 1
        q.size += size
        q.tags = tags
        q.store_ts = self.store_ts = now
        if q.each is not None:
            q.each.append((q.qoff, tags, now, nums, size))

    def append_one(self, q: RunQueue, queue_id: int, flag: int, sys_flag: int, born_ts: int,
                   born_host: bytes, reconsume: int, body, topic: str, topic_b: bytes,
                   props: str, tags: int, keys: str | None = None, uniq: str | None = None,
                   nkeys: int = 0) -> tuple[int, str] | None:
        """Write one record and its consume-queue entry (``append_single``),
        its ``nkeys`` index keys (KEYS ``keys``, UNIQ_KEY ``uniq``) when the
        run writes the index, and ``advance``; (record size, offset message
        id), or None with nothing written when it does not fit (body or
        record too big, no room in the commit-log, consume-queue or index
        file)."""
        phy = self.file_from + self.wrote
        if not q.slot_free(phy, 1) or self.index_full(nkeys):
            return None
        now = now_ms()
        r = append_single(self.buffer, self.wrote, self.limit, self.max_body, queue_id, flag,
                          q.qoff, phy, sys_flag, born_ts, born_host, now, self.store_host,
                          reconsume, body, topic_b, props, q.cmf.view, q.cpos, tags,
                          self.host_hex)
        if r is None:
            return None
        if self.index is not None and (keys or uniq):
            index_keys(self.index, self.slots, self.entries, topic, phy, now, uniq, keys, 0)
        self.advance(q, 1, r[0], tags, now)
        return r

    def append_batch(self, q: RunQueue, wire, queue_id: int, sys_flag: int, born_ts: int,
                     born_host: bytes, reconsume: int, topic_b: bytes,
                     batch_props: bytes) -> tuple[int, str] | None:
        """Write a SEND_BATCH_MESSAGE body's records, entries and index keys
        (``batch_append.append_batch``, which checks the body, the room
        in the commit-log, consume-queue and index files) and ``advance``;
        (messages, comma-joined message ids), or None with nothing written."""
        phy = self.file_from + self.wrote
        if not q.slot_free(phy, 1):
            return None
        now = now_ms()
        r = append_batch(self.buffer, self.wrote, self.limit, wire, queue_id, sys_flag, born_ts,
                         born_host, now, self.store_host, reconsume, topic_b, batch_props, q.qoff,
                         phy, q.cmf.view, q.cpos, self.index, self.slots, self.entries,
                         self.host_hex)
        if r is None:
            return None
        total, count, ids, last_tags = r
        self.advance(q, count, total, last_tags, now)
        return count, ids

    def publish_queue(self, q: RunQueue) -> tuple:
        """Bring a queue's tail and offset up to date (before ``close``, under
        the locks); the queue's ``summary``."""
        self.commit_log.topic_queue_table[(q.topic, q.queue_id)] = q.qoff
        cmf = q.cmf
        cmf.wrote_position = cmf.committed_position = q.cpos
        q.cq.max_physic_offset = q.maxphy
        return q.summary()

    def publish(self, wrote: int | None = None, store_ts: int | None = None) -> bool:
        """Under the locks: publish the commit log's write position, the
        checkpoint's last store time and the dispatch position; whether
        anything was stored.  ``wrote`` / ``store_ts`` are a compiled
        writer's (default: this run's own)."""
        if wrote is None:
            wrote = self.wrote
        if store_ts is None:
            store_ts = self.store_ts
        if wrote == self.start:
            return False
        mf = self.mf
        mf.wrote_position = wrote
        mf.committed_position = wrote
        mf.store_timestamp = store_ts
        store = self.store
        store.checkpoint.logics_msg_timestamp = store_ts
        store.reput_from_offset = self.file_from + wrote
        return True

    def release(self) -> None:
        """Release the locks (once; later calls do nothing)."""
        if self._open:
            self._open = False
            self.store._reput_lock.release()
            self.commit_log.put_lock.release()

    def close(self, wrote: int | None = None, store_ts: int | None = None) -> bool:
        """``publish`` and ``release``; whether anything was stored."""
        try:
            return self.publish(wrote, store_ts)
        finally:
            self.release()


def open_run(commit_log: CommitLog, with_index: bool) -> AppendRun | None:
    """``CommitLog.open_run``: an open AppendRun, or None (nothing taken) when
    appends must go the general way now: the store shut down or a slave's,
    a general put in progress, a transient store pool, not writeable, no
    commit-log file yet, the commit log not fully dispatched, or (with
    ``with_index``) no index file to write keys into."""
    store = commit_log.store
    cfg = commit_log.config
    if store._shutdown or cfg.brokerRole is BrokerRole.SLAVE or commit_log.begin_time_in_lock or \
            store.commit_service is not None or not store.running_flags.is_writeable():
        return None
    files = commit_log.mfq.mapped_files
    if not files:
        return None
    mf = files[-1]
    if mf.write_buffer is not None:
        return None
    index = None
    slots = entries = 0
    if with_index:
        ix = store.index_service
        f = ix.append_file()
        if f is None:
            return None
        index, slots, entries = f.mf.view, ix.max_slots, ix.max_index
    commit_log.put_lock.acquire()
    store._reput_lock.acquire()
    if store.reput_from_offset != mf.file_from_offset + mf.wrote_position:
        store._reput_lock.release()
        commit_log.put_lock.release()
        return None
    commit_log.zero_ahead(mf)
    run = commit_log.append_run
    if run is None:
        run = commit_log.append_run = AppendRun(commit_log)
    return run.arm(mf, index, slots, entries)
