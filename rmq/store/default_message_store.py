"""DefaultMessageStore: the broker's storage engine (``DefaultMessageStore`` of
4.9.8).  It owns the commit log, the consume queues, the index, the
checkpoint, the abort and lock files, dispatch (reput) and the services.

Threads: appends, dispatch and reads run on the caller's thread (the broker's
event loop); flush, commit, allocation, cleaning and statistics run on their
own threads (``flush.py``, ``allocate.py``, ``clean.py``, ``stats.py``).  A
caller without an event loop (the Spark generator, tools) uses the
synchronous ``put_message`` / ``put_messages``.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import threading
from collections.abc import Callable

import psutil

from rmq.common import message as mc
from rmq.common.topics import SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC, is_retry_topic
from rmq.store import message_codec as codec
from rmq.store.checkpoint import StoreCheckpoint
from rmq.store.clean import CleanService, disk_used_ratio
from rmq.store.commit_log import CommitLog, _now_ms
from rmq.store.config import BrokerRole, FlushDiskType, MessageStoreConfig
from rmq.store.consume_queue import ConsumeQueue
from rmq.store.consume_queue_ext import ConsumeQueueExt
from rmq.store.dispatch_room import DispatchRoom
from rmq.store.flush import (
    CommitRealTimeService,
    FlushConsumeQueueService,
    FlushRealTimeService,
    GroupCommitRequest,
    GroupCommitService,
)
from rmq.store.index import IndexService
from rmq.store.mapped_file import page_cache_busy
from rmq.store.message import MessageExtBatch, MessageExtBrokerInner
from rmq.store.multi_dispatch import is_lmq
from rmq.store.reader import MessageReaderMixin
from rmq.store.reput import DispatchStalled, ReputMixin
from rmq.store.results import (
    AppendMessageResult,
    AppendMessageStatus,
    PutMessageResult,
    PutMessageStatus,
)
from rmq.store.running_flags import RunningFlags
from rmq.store.stats import StoreStatsService

log = logging.getLogger("store")

# (topic, queue id, next offset, tags code, store time, messages)
# (topic, queueId, next offset, tags code, store time, messages, bytes)
ArrivalListener = Callable[[str, int, int, int, int, int, int], None]


def _flushed(token: tuple, status: PutMessageStatus) -> None:
    """Group commit answer for a loop-side put: the status into its result,
    then the caller's callback."""
    result, done = token
    if status is not PutMessageStatus.PUT_OK:
        result.status = status
    done(result)


class StoreLockedError(RuntimeError):
    """Another store already runs on this directory."""


_APPEND_TO_PUT = {
    AppendMessageStatus.MESSAGE_SIZE_EXCEEDED: PutMessageStatus.MESSAGE_ILLEGAL,
    AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED: PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
    AppendMessageStatus.END_OF_FILE: PutMessageStatus.CREATE_MAPEDFILE_FAILED,
    AppendMessageStatus.UNKNOWN_ERROR: PutMessageStatus.CREATE_MAPEDFILE_FAILED,
    AppendMessageStatus.NO_ROOM_FOR_DISPATCH: PutMessageStatus.SERVICE_NOT_AVAILABLE,
}


class DefaultMessageStore(ReputMixin, MessageReaderMixin):
    """The store: start-up, recovery, puts and housekeeping here; dispatch in
    ``reput.py``, reads in ``reader.py``."""

    # the fields each single put, each send lane read and each reput walk
    # use (and set) slotted: the compiled put (rmq._fast.store_put), lane
    # (rmq._fast.send_lane) and walk (rmq._fast.store_dispatch) read them at
    # their slots; the rest in the dict
    __slots__ = ("_shutdown", "reput_from_offset", "consume_queue_table", "checkpoint",
                 "commit_service", "message_runs_listener", "index_service", "config",
                 "commit_log", "_loop", "_loop_thread")

    def __init__(
        self, config: MessageStoreConfig, store_host: tuple[str, int] = ("127.0.0.1", 10911),
        broker_cluster_name: str = "DefaultCluster", message_arriving_listener: ArrivalListener | None = None,
        commit_log: Callable[[DefaultMessageStore], CommitLog] | None = None,
    ) -> None:
        """``commit_log``: the commit log implementation, made with the store
        (``CommitLog`` unless given; the broker's start-up passes
        ``rmq.dledger.commit_log.DLedgerCommitLog`` when ``enableDLegerCommitLog`` is set)."""
        config.normalize()
        self.config = config
        self.store_host = store_host
        self.broker_cluster_name = broker_cluster_name
        self.message_arriving_listener = message_arriving_listener
        # the same for a read's runs of appends at once (RunQueue.summary tuples),
        # when the broker has one; else message_arriving_listener hears each run
        self.message_runs_listener: Callable[[list[tuple]], None] | None = None
        # checks and rewrites before a put, each answering None or a refusal
        self.put_message_hooks: list[Callable[[object], PutMessageStatus | None]] = []
        self.root = config.storePathRootDir
        self.running_flags = RunningFlags()
        self.stats = StoreStatsService()
        self.dispatch_room = DispatchRoom(self)
        if config.enableDLegerCommitLog and commit_log is None:
            raise ValueError("enableDLegerCommitLog=true needs the DLedger commit log "
                             "(commit_log=rmq.dledger.commit_log.DLedgerCommitLog)")
        self.commit_log = (commit_log or CommitLog)(self)
        self.consume_queue_table: dict[str, dict[int, ConsumeQueue]] = {}
        self.lmq_consume_queue_num = 0  # LMQ topics with a consume queue (maxLmqConsumeQueueNum)
        self.checkpoint: StoreCheckpoint | None = None
        self.index_service: IndexService | None = None
        self.reput_from_offset = 0
        # CommitLogDispatcherCalcBitMap: (topic, properties) -> the SQL92 bloom
        # bitmap of a dispatched message, or None; set by the broker when
        # enableCalcFilterBitMap is on (only used with the ext files)
        self.bitmap_calculator: Callable[[str, dict[str, str]], bytes | None] | None = None
        self.ha_service = None  # set by the HA module: is_slave_ok(offset), async wait_transfer(offset, ms)
        self.flush_service = (
            GroupCommitService(self) if config.flushDiskType is FlushDiskType.SYNC_FLUSH else FlushRealTimeService(self)
        )
        self.commit_service = CommitRealTimeService(self) if config.is_transient_store_pool_active() else None
        self.flush_cq_service = FlushConsumeQueueService(self)
        self.clean_service = CleanService(self)
        self._reput_lock = threading.RLock()
        self._topic_bytes: dict[str, bytes] = {}
        self._cq_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = -1  # ident of the thread running _loop
        self._lock_fd: int | None = None
        self._refusals = 0  # puts refused in a row because the store is not writable
        self._recovery_stalled_at = -1  # a record recovery could not dispatch (disk full)
        self._shutdown = True
        self._loaded = False
        self._memory_limit = psutil.virtual_memory().total * config.accessMessageInMemoryMaxRatio // 100

    # ======================================================================
    # start-up and shutdown
    # ======================================================================
    def _path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    def _take_lock(self) -> None:
        os.makedirs(self.root, exist_ok=True)
        fd = os.open(self._path("lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            # flock conflicts even inside one process; lockf is what a JVM's
            # FileChannel.lock takes, so a Java broker is kept out as well
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
        except OSError:
            os.close(fd)
            raise StoreLockedError(
                f"Lock failed, MQ already started: another store holds {self._path('lock')}"
            ) from None
        os.pwrite(fd, b"lock", 0)
        os.fsync(fd)
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            try:
                fcntl.lockf(self._lock_fd, fcntl.LOCK_UN, 1, 0)
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            finally:
                os.close(self._lock_fd)
                self._lock_fd = None

    def load(self) -> bool:
        """Lock the directory, map every file and recover (normally when the
        abort file is absent, abnormally otherwise).  Raises StoreLockedError
        when another store runs here; returns False when files are unusable."""
        self._take_lock()
        cfg = self.config
        last_exit_ok = not os.path.exists(self._path("abort"))
        self.last_exit_ok = last_exit_ok  # the timer store revises its counts when not
        log.info("last shutdown %s", "normally" if last_exit_ok else "abnormally")
        ok = self.commit_log.load() and self._load_consume_queues()
        if ok:
            self.checkpoint = StoreCheckpoint(self._path("checkpoint"))
            self.index_service = IndexService(
                self._path("index"), cfg.maxHashSlotNum, cfg.maxIndexNum, self.checkpoint, cfg.maxMsgsNumBatch
            )
            ok = self.index_service.load(last_exit_ok)
        if ok:
            self._recover(last_exit_ok)
            if not self.reserve_tails():
                self.mark_no_space("store")
            self._loaded = True
        else:
            self._release_lock()
        log.info("load over, and the result is %s", "OK" if ok else "Failed")
        return ok

    def _load_consume_queues(self) -> bool:
        root = self._path("consumequeue")
        if not os.path.isdir(root):
            return True
        for topic in sorted(os.listdir(root)):
            tdir = os.path.join(root, topic)
            if not os.path.isdir(tdir):
                continue
            for qdir in sorted(os.listdir(tdir)):
                if not qdir.isdigit():
                    continue
                cq = self._new_consume_queue(topic, int(qdir))
                if not cq.load():
                    return False
                if topic not in self.consume_queue_table and is_lmq(topic):
                    self.lmq_consume_queue_num += 1
                self.consume_queue_table.setdefault(topic, {})[int(qdir)] = cq
        return True

    def _recover(self, last_exit_ok: bool) -> None:
        max_phy_cq = -1
        for cq in self.all_consume_queues():
            cq.recover()
            max_phy_cq = max(max_phy_cq, cq.max_physic_offset)
        if last_exit_ok:
            self.commit_log.recover_normally(max_phy_cq)
        else:
            cfg = self.config
            min_ts = self.checkpoint.min_timestamp_index() if cfg.messageIndexEnable and cfg.messageIndexSafe \
                else self.checkpoint.min_timestamp()
            self.commit_log.recover_abnormally(max_phy_cq, min_ts, self._dispatch_recovered,
                                               self.index_service.dropped_begin_phy_offset)
        self._recover_topic_queue_table()

    def _dispatch_recovered(self, r: tuple) -> None:
        """Dispatch one record found by abnormal recovery.  After a record whose
        consume-queue or index file did not fit, nothing more is dispatched
        here: ``start`` resumes from that record once there is room."""
        if self._recovery_stalled_at >= 0:
            return
        try:
            self._dispatch(r, False)
        except DispatchStalled:
            self._recovery_stalled_at = r[5]

    def reserve_tails(self) -> bool:
        """Reserve the blocks of the files appends go on into (the last file of
        the commit log, of every consume queue and of the index); False when
        the disk has no room for one of them."""
        ok = self.commit_log.mfq.reserve_last()
        for cq in self.all_consume_queues():
            ok = cq.mfq.reserve_last() and ok
        if self.index_service is not None:
            ok = self.index_service.reserve_last() and ok
        return ok

    def recover_topic_queue_table(self) -> None:
        """The next queue offset of every queue from its consume queue (a DLedger
        leader does this before taking writes)."""
        self._recover_topic_queue_table()

    def _recover_topic_queue_table(self) -> None:
        table: dict[tuple[str, int], int] = {}
        min_phy = self.commit_log.get_min_offset()
        for cq in self.all_consume_queues():
            table[(cq.topic, cq.queue_id)] = cq.get_max_offset_in_queue()
            cq.correct_min_offset(min_phy)
        self.commit_log.topic_queue_table = table

    def start(self) -> None:
        """Catch dispatch up with the commit log, start the services, create abort."""
        if not self._loaded:
            raise RuntimeError("load() must succeed before start()")
        try:
            self._loop = asyncio.get_running_loop()
            self._loop_thread = threading.get_ident()
        except RuntimeError:
            self._loop = None
        max_phy = self.commit_log.get_min_offset()
        for cq in self.all_consume_queues():
            max_phy = max(max_phy, cq.max_physic_offset)
        self.reput_from_offset = max(max_phy, 0, self.commit_log.get_min_offset())
        if self._recovery_stalled_at >= 0:
            self.reput_from_offset = min(self.reput_from_offset, self._recovery_stalled_at)
        self._shutdown = False
        self.do_reput()
        self._recover_topic_queue_table()
        self.flush_service.start()
        if self.commit_service is not None:
            self.commit_service.start()
        self.flush_cq_service.start()
        self.clean_service.start()
        self.stats.start()
        with open(self._path("abort"), "wb"):
            pass

    def shutdown(self) -> None:
        """Stop the services, flush everything, remove abort last (only when
        writable and fully dispatched), release the lock."""
        if self._shutdown and not self._loaded:
            return
        was_running = not self._shutdown
        self._shutdown = True
        if was_running:
            self.clean_service.shutdown()
            self.stats.shutdown()
            if self.commit_service is not None:
                self.commit_service.shutdown()
            self.flush_service.shutdown()
            self.flush_cq_service.shutdown()
        self.do_reput()
        self.commit_log.mfq.flush(0)
        for cq in self.all_consume_queues():
            cq.flush(0)
        if self.index_service is not None:  # first: its flush threads write the checkpoint
            self.index_service.shutdown()
        if self.checkpoint is not None:
            self.checkpoint.physic_msg_timestamp = max(self.checkpoint.physic_msg_timestamp,
                                                      self.commit_log.mfq.store_timestamp)
            self.checkpoint.shutdown()
        self.commit_log.shutdown()
        for cq in self.all_consume_queues():
            cq.shutdown()
        if was_running and self.running_flags.is_writeable() and self.dispatch_behind_bytes() == 0:
            try:
                os.unlink(self._path("abort"))
            except FileNotFoundError:
                pass
        else:
            log.warning("the store shut down abnormally; abort file kept")
        self._loaded = False
        self._release_lock()

    def destroy(self) -> None:
        """Delete every data file (used by tests and tools)."""
        self.destroy_logics()
        self.commit_log.destroy()
        if self.index_service is not None:
            self.index_service.destroy()
        for name in ("abort", "checkpoint"):
            try:
                os.unlink(self._path(name))
            except FileNotFoundError:
                pass

    def destroy_logics(self) -> None:
        for cq in self.all_consume_queues():
            cq.destroy()
        with self._cq_lock:
            self.consume_queue_table = {}
            self.lmq_consume_queue_num = 0

    def truncate_dirty_logic_files(self, phy_offset: int) -> None:
        for cq in self.all_consume_queues():
            cq.truncate_dirty_logic_files(phy_offset)

    # ======================================================================
    # consume queues
    # ======================================================================
    def all_consume_queues(self) -> list[ConsumeQueue]:
        return [cq for qs in list(self.consume_queue_table.values()) for cq in list(qs.values())]

    def find_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        qs = self.consume_queue_table.get(topic)
        cq = qs.get(queue_id) if qs is not None else None
        if cq is None:
            with self._cq_lock:
                if topic not in self.consume_queue_table and is_lmq(topic):
                    self.lmq_consume_queue_num += 1
                qs = self.consume_queue_table.setdefault(topic, {})
                cq = qs.get(queue_id)
                if cq is None:
                    cq = self._new_consume_queue(topic, queue_id)
                    qs[queue_id] = cq
        return cq

    def _new_consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        """A queue's ConsumeQueue, with its ext files under ``consumequeue_ext/``
        when enableConsumeQueueExt is on (4.9.8 decides per store, not per topic)."""
        cfg = self.config
        ext = None
        if cfg.enableConsumeQueueExt:
            ext = ConsumeQueueExt(topic, queue_id, self._path("consumequeue_ext"),
                                  cfg.mappedFileSizeConsumeQueueExt)
        return ConsumeQueue(topic, queue_id, self._path("consumequeue"),
                            cfg.consume_queue_file_size(), self.checkpoint, ext)

    def _existing_cq(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        qs = self.consume_queue_table.get(topic)
        return qs.get(queue_id) if qs is not None else None

    # ======================================================================
    # puts
    # ======================================================================
    @property
    def accepts_puts(self) -> bool:
        """Whether the store's status lets a put in now: not shut down, not a
        slave's, writeable (what ``_check_store_status`` refuses, for a lane
        that asks before it reads a send)."""
        return not self._shutdown and self.config.brokerRole is not BrokerRole.SLAVE and \
            self.running_flags.is_writeable()

    def _check_store_status(self) -> PutMessageStatus:
        if self._shutdown:
            log.warning("message store has shutdown, so putMessage is forbidden")
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if self.config.brokerRole is BrokerRole.SLAVE:
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if not self.running_flags.is_writeable():
            if self._refusals % 50000 == 0:  # once in 50,000 refusals, as 4.9.8 prints it
                log.warning("the message store is not writable. It may be caused by one of the following "
                            "reasons: the broker's disk is full, write to logic queue error, write to "
                            "index file error, etc")
            self._refusals += 1
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        self._refusals = 0
        if self.commit_log.begin_time_in_lock and self.is_os_page_cache_busy():
            return PutMessageStatus.OS_PAGECACHE_BUSY
        return PutMessageStatus.PUT_OK

    def _check_message(self, topic: str, props: str) -> PutMessageStatus:
        if len(topic) > codec.MAX_TOPIC_LENGTH or (
                not topic.isascii() and len(topic.encode("utf-8")) > codec.MAX_TOPIC_LENGTH):
            log.warning("putMessage message topic length too long %d", len(topic))
            return PutMessageStatus.MESSAGE_ILLEGAL
        if len(props) > codec.MAX_PROPERTIES_LENGTH:
            log.warning("putMessage message properties length too long %d", len(props))
            return PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        return PutMessageStatus.PUT_OK

    def _append(self, msg, batch: bool) -> PutMessageResult:
        status = self._check_store_status()
        if status is PutMessageStatus.PUT_OK:
            status = self._check_message(msg.topic, msg.properties_string)
        if status is PutMessageStatus.PUT_OK and not batch and self.lmq_queue_num_exceeded() and \
                msg.properties.get(mc.PROPERTY_INNER_MULTI_DISPATCH, "").strip():
            status = PutMessageStatus.LMQ_CONSUME_QUEUE_NUM_EXCEEDED
        if status is PutMessageStatus.PUT_OK:
            for hook in self.put_message_hooks:  # 5.3.3's putMessageHookList (timer messages)
                refused = hook(msg)
                if refused is not None:
                    status = refused
                    break
        if status is not PutMessageStatus.PUT_OK:
            self.stats.on_put_failed()
            return PutMessageResult(status)
        result = self.commit_log.put_messages(msg) if batch else self.commit_log.put_message(msg)
        if not result.is_ok():
            self.stats.on_put_failed()
            if result.status is AppendMessageStatus.NO_ROOM_FOR_DISPATCH:
                return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, result,
                                        remark=self.dispatch_room.remark)
            if self.commit_log.mfq.no_space:
                self.mark_no_space("commit log")
            return PutMessageResult(_APPEND_TO_PUT[result.status], result)
        # elapsed = the time spent under the put lock (one loop writes: no waiting for it)
        self.stats.on_put(msg.topic, result.msg_num, result.wrote_bytes, result.page_cache_rt)
        cfg = self.config
        if self.commit_log.dispatch_on_commit:  # dispatched by the log's commit listener
            return PutMessageResult(PutMessageStatus.PUT_OK, result)
        if self.commit_service is None:
            if batch or not self._dispatch_put(msg, result):
                self.do_reput()
        elif not cfg.flushCommitLogTimed:
            self.commit_service.wakeup()
        if cfg.flushDiskType is FlushDiskType.ASYNC_FLUSH and not cfg.flushCommitLogTimed:
            self.flush_service.wake_for(result.wrote_offset + result.wrote_bytes,
                                        result.store_timestamp)
        return PutMessageResult(PutMessageStatus.PUT_OK, result)

    def _flush_request(self, result: PutMessageResult, wait: bool) -> GroupCommitRequest | None:
        if self.config.flushDiskType is not FlushDiskType.SYNC_FLUSH or not result.is_ok():
            return None
        if not wait:
            self.flush_service.wakeup()
            return None
        ar = result.append_result
        req = GroupCommitRequest(ar.wrote_offset + ar.wrote_bytes, self.config.syncFlushTimeout)
        self.flush_service.put_request(req)
        return req

    def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        """Synchronous put (no event loop needed); waits for the group commit
        under SYNC_FLUSH.  Replication waits are only done by the async API."""
        result = self._append(msg, False)
        return self._wait_flush_sync(result, msg.is_wait_store_msg_ok())

    def put_messages(self, batch: MessageExtBatch) -> PutMessageResult:
        result = self._append(batch, True)
        return self._wait_flush_sync(result, batch.is_wait_store_msg_ok())

    def _wait_flush_sync(self, result: PutMessageResult, wait: bool) -> PutMessageResult:
        req = self._flush_request(result, wait)
        if req is not None:
            try:
                status = req.future.result(self.config.syncFlushTimeout / 1000)
            except TimeoutError:
                status = PutMessageStatus.FLUSH_DISK_TIMEOUT
            if status is not PutMessageStatus.PUT_OK:
                result.status = status
        return result

    def _bind_loop(self) -> asyncio.AbstractEventLoop:
        """The running loop becomes the store's loop (a store started without one)."""
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        return self._loop

    async def async_put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        """Put on the event loop; completes at once under ASYNC_FLUSH, after the
        group commit under SYNC_FLUSH, after the slave under SYNC_MASTER."""
        if self._loop is None:
            self._bind_loop()
        result = self._append(msg, False)
        return await self._complete(result, msg.is_wait_store_msg_ok())

    async def async_put_messages(self, batch: MessageExtBatch) -> PutMessageResult:
        if self._loop is None:
            self._bind_loop()
        result = self._append(batch, True)
        return await self._complete(result, batch.is_wait_store_msg_ok())

    def put_message_then(self, msg: MessageExtBrokerInner,
                         done: Callable[[PutMessageResult], None]) -> PutMessageResult | None:
        """Put on the event loop without a coroutine: the result when it is final
        now, else None and ``done(result)`` later on the loop, once the group
        commit covered the message (SYNC_FLUSH) or a quorum holds it (a
        replicating commit log).  SYNC_MASTER puts use ``async_put_message``."""
        return self._then(self._append(msg, False), msg.is_wait_store_msg_ok(), done)

    def put_messages_then(self, batch: MessageExtBatch,
                          done: Callable[[PutMessageResult], None]) -> PutMessageResult | None:
        return self._then(self._append(batch, True), batch.is_wait_store_msg_ok(), done)

    def _then(self, result: PutMessageResult, wait: bool,
              done: Callable[[PutMessageResult], None]) -> PutMessageResult | None:
        if result.is_ok() and result.append_result.quorum is not None:
            result.append_result.quorum.add_done_callback(
                lambda quorum: _flushed((result, done), quorum.result()))
            return None
        if self.config.flushDiskType is not FlushDiskType.SYNC_FLUSH or not result.is_ok():
            return result
        if not wait:
            self.flush_service.wakeup()
            return result
        loop = self._loop
        if loop is None:
            loop = self._bind_loop()
        ar = result.append_result
        self.flush_service.wait_on_loop(loop, ar.wrote_offset + ar.wrote_bytes,
                                        self.config.syncFlushTimeout, (result, done), _flushed)
        return None

    async def _complete(self, result: PutMessageResult, wait: bool) -> PutMessageResult:
        """Wait for what the put asks: the group commit (SYNC_FLUSH) and the
        slave's acknowledgement (SYNC_MASTER) at the same time, as 4.9.8
        combines its flush and replica futures; a failed replica wait's status
        wins over a failed flush's."""
        if not result.is_ok():
            return result
        quorum = result.append_result.quorum
        if quorum is not None:  # acknowledged once a quorum of the group holds it
            result.status = await quorum
            return result
        replica = self._replica_wait(result) if wait else PutMessageStatus.PUT_OK
        if self.config.flushDiskType is FlushDiskType.SYNC_FLUSH:
            if wait:
                fut = self._loop.create_future()
                self._then(result, wait, fut.set_result)
                result = await fut
            else:
                self.flush_service.wakeup()
        if isinstance(replica, asyncio.Future):
            acked = await replica
            replica = PutMessageStatus.PUT_OK if acked else PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        if replica is not PutMessageStatus.PUT_OK:
            result.status = replica
        return result

    def _replica_wait(self, result: PutMessageResult) -> PutMessageStatus | asyncio.Future:
        """Start the slave wait of a SYNC_MASTER put: PUT_OK when none is due,
        SLAVE_NOT_AVAILABLE without a slave close enough, else the future of
        the wait (True once a slave acknowledged the put's end)."""
        if self.config.brokerRole is not BrokerRole.SYNC_MASTER:
            return PutMessageStatus.PUT_OK
        ar = result.append_result
        end = ar.wrote_offset + ar.wrote_bytes
        ha = self.ha_service
        if ha is None or not ha.is_slave_ok(end):
            return PutMessageStatus.SLAVE_NOT_AVAILABLE
        return ha.wait_transfer(end, self.config.slaveTimeout)

    # ======================================================================
    # status
    # ======================================================================
    def get_min_phy_offset(self) -> int:
        return self.commit_log.get_min_offset()

    def get_max_phy_offset(self) -> int:
        return self.commit_log.get_max_offset()

    def is_os_page_cache_busy(self) -> bool:
        """isOSPageCacheBusy, asked for every send (rejectRequest).  Outside a
        put the lock's begin time is 0 and the rule's difference is the whole
        clock, never busy: that common case skips the clock read."""
        begin = self.commit_log.begin_time_in_lock
        return begin != 0 and page_cache_busy(begin, self.config.osPageCacheBusyTimeOutMills)

    def lock_time_mills(self) -> int:
        begin = self.commit_log.begin_time_in_lock
        return _now_ms() - begin if begin > 0 else 0

    def disk_util(self) -> str:
        """The used ratios of the commit log (the emptiest of its paths), consume
        queue and index disks, as 4.9.8's send refusal quotes them."""
        physic = min((disk_used_ratio(d) for d in self.config.commit_log_dirs()), default=1.0)
        return (f"CL: {physic:5.2f} CQ: {disk_used_ratio(self._path('consumequeue')):5.2f} "
                f"INDEX: {disk_used_ratio(self._path('index')):5.2f}")

    def get_runtime_info(self) -> dict[str, str]:
        info = self.stats.runtime_info()
        dirs = self.config.commit_log_dirs()
        ratios = [disk_used_ratio(d) for d in dirs]
        info["commitLogDiskRatio"] = str(min(ratios) if ratios else -1.0)
        for d, r in zip(dirs, ratios, strict=True):
            info[f"commitLogDiskRatio_{d}"] = str(r)
        info["consumeQueueDiskRatio"] = str(disk_used_ratio(self._path("consumequeue")))
        info["commitLogMinOffset"] = str(self.get_min_phy_offset())
        info["commitLogMaxOffset"] = str(self.get_max_phy_offset())
        return info

    def remain_transient_store_buffer_numbs(self) -> int:
        pool = self.commit_log.mfq.pool
        return pool.available() if pool is not None else 2**31 - 1

    def remain_how_many_data_to_flush(self) -> int:
        return self.commit_log.mfq.remain_how_many_data_to_flush()

    # ======================================================================
    # maintenance
    # ======================================================================
    def clean_expired_consumer_queue(self) -> None:
        """Drop consume queues whose every entry points at deleted data."""
        min_phy = self.commit_log.get_min_offset()
        for topic, qs in list(self.consume_queue_table.items()):
            if topic == SCHEDULE_TOPIC:
                continue
            for qid, cq in list(qs.items()):
                last = cq.get_last_offset()
                if last == -1 or last < min_phy:
                    log.info("cleanExpiredConsumerQueue: %s %d consumer queue destroyed", topic, qid)
                    cq.destroy()
                    with self._cq_lock:
                        qs.pop(qid, None)
                        self.commit_log.topic_queue_table.pop((topic, qid), None)
            if not qs:
                with self._cq_lock:
                    self.consume_queue_table.pop(topic, None)

    def clean_unused_topic(self, topics: set[str]) -> int:
        """Destroy consume queues of topics no longer configured."""
        victims = {t for t in self.consume_queue_table
                   if t not in topics and t not in (SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC) and not is_retry_topic(t)
                   and not is_lmq(t)}
        self.delete_topics(victims)
        return len(victims)

    def clean_unused_lmq_topic(self, topic: str) -> None:
        """DELETE_TOPIC of an LMQ: its consume queue goes (LMQs have no topic config)."""
        if self.delete_topics({topic}):
            self.lmq_consume_queue_num -= 1
            log.info("cleanUnusedLmqTopic: %s, topic destroyed", topic)

    def lmq_queue_num_exceeded(self) -> bool:
        cfg = self.config
        return cfg.enableLmq and cfg.enableMultiDispatch and \
            self.lmq_consume_queue_num > cfg.maxLmqConsumeQueueNum

    def delete_topics(self, topics: set[str]) -> int:
        n = 0
        for topic in topics:
            with self._cq_lock:
                qs = self.consume_queue_table.pop(topic, None)
            if not qs:
                continue
            for qid, cq in qs.items():
                cq.destroy()
                self.commit_log.topic_queue_table.pop((topic, qid), None)
                n += 1
        return n

    def execute_delete_files_manually(self) -> None:
        self.clean_service.commit_log.manual_delete_file_several_times = 20
        log.info("executeDeleteFilesManually was invoked")

    def clean_resources_once(self) -> None:
        """One pass of both cleaners (what the scheduled task does)."""
        self.clean_service.run_once()

    # ======================================================================
    # HA hooks
    # ======================================================================
    def get_commit_log_data(self, offset: int) -> memoryview | None:
        """Raw readable commit log bytes from ``offset`` to the end of its file."""
        if self._shutdown:
            return None
        data = self.commit_log.get_data(offset, offset == 0)
        return data[0] if data is not None else None

    def append_to_commit_log(self, start_offset: int, data) -> bool:
        """Slave side: append replicated bytes at ``start_offset`` and dispatch.
        An empty commit log starts at the file the master streams from (a new
        slave of a master with several files gets only the last one)."""
        if self._shutdown:
            return False
        cl = self.commit_log
        if start_offset and cl.get_max_offset() == 0 and start_offset % cl.file_size == 0:
            cl.mfq.get_last_mapped_file(start_offset, need_create=True)
        ok = cl.append_data(start_offset, data)
        if ok:
            self.do_reput()
        return ok

    def now(self) -> int:
        return _now_ms()


__all__ = ["DefaultMessageStore", "StoreLockedError", "AppendMessageResult"]
