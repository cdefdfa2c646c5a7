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
import struct
import threading
import time
from collections.abc import Callable

import psutil

from rmq.common import message as mc
from rmq.common.topics import SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC, is_retry_topic
from rmq.store import message_codec as codec
from rmq.store.checkpoint import StoreCheckpoint
from rmq.store.clean import CleanService, disk_used_ratio
from rmq.store.commit_log import CommitLog
from rmq.store.config import BrokerRole, FlushDiskType, MessageStoreConfig
from rmq.store.consume_queue import CQ_STORE_UNIT_SIZE, FILLER_SIZE, ConsumeQueue
from rmq.store.dispatch import dispatch_run
from rmq.store.flush import (
    CommitRealTimeService,
    FlushConsumeQueueService,
    FlushRealTimeService,
    GroupCommitRequest,
    GroupCommitService,
)
from rmq.store.index import IndexService
from rmq.store.mapped_file import page_cache_busy
from rmq.store.message import MessageExt, MessageExtBatch, MessageExtBrokerInner
from rmq.store.results import (
    AppendMessageResult,
    AppendMessageStatus,
    GetMessageResult,
    GetMessageStatus,
    PutMessageResult,
    PutMessageStatus,
    QueryMessageResult,
)
from rmq.store.running_flags import RunningFlags
from rmq.store.stats import StoreStatsService

log = logging.getLogger("store")

_INT = struct.Struct(">i")
_TX_MASK = mc.TRANSACTION_ROLLBACK_TYPE  # transaction bits of sysFlag
_TX_NOT = mc.TRANSACTION_NOT_TYPE
_TX_COMMIT = mc.TRANSACTION_COMMIT_TYPE
_TX_ROLLBACK = mc.TRANSACTION_ROLLBACK_TYPE
_CQ_ENTRY = struct.Struct(">qiq")
ArrivalListener = Callable[[str, int, int, int, int, dict], None]


def _flushed(token: tuple, status: PutMessageStatus) -> None:
    """Group commit answer for a loop-side put: the status into its result,
    then the caller's callback."""
    result, done = token
    if status is not PutMessageStatus.PUT_OK:
        result.status = status
    done(result)


class StoreLockedError(RuntimeError):
    """Another store already runs on this directory."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


_APPEND_TO_PUT = {
    AppendMessageStatus.MESSAGE_SIZE_EXCEEDED: PutMessageStatus.MESSAGE_ILLEGAL,
    AppendMessageStatus.PROPERTIES_SIZE_EXCEEDED: PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
    AppendMessageStatus.END_OF_FILE: PutMessageStatus.CREATE_MAPEDFILE_FAILED,
    AppendMessageStatus.UNKNOWN_ERROR: PutMessageStatus.CREATE_MAPEDFILE_FAILED,
}


class DefaultMessageStore:
    def __init__(
        self, config: MessageStoreConfig, store_host: tuple[str, int] = ("127.0.0.1", 10911),
        broker_cluster_name: str = "DefaultCluster", message_arriving_listener: ArrivalListener | None = None,
    ) -> None:
        config.normalize()
        self.config = config
        self.store_host = store_host
        self.broker_cluster_name = broker_cluster_name
        self.message_arriving_listener = message_arriving_listener
        self.root = config.storePathRootDir
        self.running_flags = RunningFlags()
        self.stats = StoreStatsService()
        self.commit_log = CommitLog(self)
        self.consume_queue_table: dict[str, dict[int, ConsumeQueue]] = {}
        self.checkpoint: StoreCheckpoint | None = None
        self.index_service: IndexService | None = None
        self.reput_from_offset = 0
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
                cq = ConsumeQueue(topic, int(qdir), root, self.config.consume_queue_file_size(), self.checkpoint)
                if not cq.load():
                    return False
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
        self._dispatch(r, None)

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
        if self.checkpoint is not None:
            self.checkpoint.physic_msg_timestamp = max(self.checkpoint.physic_msg_timestamp,
                                                      self.commit_log.mfq.store_timestamp)
            self.checkpoint.shutdown()
        if self.index_service is not None:
            self.index_service.shutdown()
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
                qs = self.consume_queue_table.setdefault(topic, {})
                cq = qs.get(queue_id)
                if cq is None:
                    cq = ConsumeQueue(topic, queue_id, self._path("consumequeue"),
                                      self.config.consume_queue_file_size(), self.checkpoint)
                    qs[queue_id] = cq
        return cq

    def _existing_cq(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        qs = self.consume_queue_table.get(topic)
        return qs.get(queue_id) if qs is not None else None

    # ======================================================================
    # puts
    # ======================================================================
    def _check_store_status(self) -> PutMessageStatus:
        if self._shutdown:
            log.warning("message store has shutdown, so putMessage is forbidden")
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if self.config.brokerRole is BrokerRole.SLAVE:
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        if not self.running_flags.is_writeable():
            log.warning("the message store is not writable. It may be caused by one of the following reasons: "
                        "the broker's disk is full, write to logic queue error, write to index file error, etc")
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
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
        if status is not PutMessageStatus.PUT_OK:
            self.stats.on_put_failed()
            return PutMessageResult(status)
        result = self.commit_log.put_messages(msg) if batch else self.commit_log.put_message(msg)
        if not result.is_ok():
            self.stats.on_put_failed()
            return PutMessageResult(_APPEND_TO_PUT[result.status], result)
        # elapsed = the time spent under the put lock (one loop writes: no waiting for it)
        self.stats.on_put(msg.topic, result.msg_num, result.wrote_bytes, result.page_cache_rt)
        cfg = self.config
        if self.commit_service is None:
            if batch or not self._dispatch_put(msg, result):
                self.do_reput()
        elif not cfg.flushCommitLogTimed:
            self.commit_service.wakeup()
        if cfg.flushDiskType is FlushDiskType.ASYNC_FLUSH and not cfg.flushCommitLogTimed:
            self.flush_service.wakeup()
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
        commit covered the message (SYNC_FLUSH).  SYNC_MASTER puts use
        ``async_put_message``."""
        return self._then(self._append(msg, False), msg.is_wait_store_msg_ok(), done)

    def put_messages_then(self, batch: MessageExtBatch,
                          done: Callable[[PutMessageResult], None]) -> PutMessageResult | None:
        return self._then(self._append(batch, True), batch.is_wait_store_msg_ok(), done)

    def _then(self, result: PutMessageResult, wait: bool,
              done: Callable[[PutMessageResult], None]) -> PutMessageResult | None:
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
        if self.config.flushDiskType is FlushDiskType.SYNC_FLUSH and result.is_ok():
            if wait:
                fut = self._loop.create_future()
                self._then(result, wait, fut.set_result)
                result = await fut
            else:
                self.flush_service.wakeup()
        if result.is_ok() and wait and self.config.brokerRole is BrokerRole.SYNC_MASTER:
            ar = result.append_result
            end = ar.wrote_offset + ar.wrote_bytes
            ha = self.ha_service
            if ha is None or not ha.is_slave_ok(end):
                result.status = PutMessageStatus.SLAVE_NOT_AVAILABLE
            elif not await ha.wait_transfer(end, self.config.slaveTimeout):
                result.status = PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        return result

    # ======================================================================
    # dispatch (ReputMessageService)
    # ======================================================================
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

    def _dispatch_region(self, view, notify: bool) -> tuple[int, bool]:
        """Scan and dispatch the records of one readable region; returns the
        position reached and whether a blank (end of file) was met."""
        scan = codec.scan_record
        dispatch = self._dispatch
        n = len(view)
        pos = 0
        while pos < n:
            r = scan(view, pos, n, False)
            st = r[0]
            if st == codec.SCAN_MESSAGE:
                dispatch(r, view if notify else None)
                pos += r[1]
                if pos < n:
                    pos = self._dispatch_run(view, pos, n, r[2], r[3], notify)
            elif st == codec.SCAN_BLANK:
                return pos, True
            elif st == codec.SCAN_SIZE_MISMATCH and r[1] > 0:
                log.error("[BUG]read total count not equals msg total size at %d", r[5] + pos)
                pos += r[1]
            else:
                break
        return pos, False

    def _dispatch_run(self, view, pos: int, n: int, topic: str, queue_id: int, notify: bool) -> int:
        """Dispatch the following records of the same topic/queue in bulk
        (``dispatch.dispatch_run``); returns where the per-record path resumes."""
        cq = self._existing_cq(topic, queue_id)
        mf = cq._tail if cq is not None else None
        if mf is None or mf.wrote_position >= cq.file_size:
            return pos
        index = None
        cfg = self.config
        if cfg.messageIndexEnable:
            f = self.index_service.writable_file()
            if f is None:
                return pos
            index = f.mf.view
        topic_b = self._topic_bytes.get(topic)
        if topic_b is None:
            topic_b = self._topic_bytes[topic] = topic.encode("utf-8")
        new_pos, cq_pos, count, max_phy, last = dispatch_run(
            view, pos, n, topic_b, queue_id, mf.view, mf.wrote_position, mf.file_from_offset,
            cq.max_physic_offset, index, cfg.maxHashSlotNum, cfg.maxIndexNum,
        )
        if count:
            mf.wrote_position = mf.committed_position = cq_pos
            cq.max_physic_offset = max_phy
            qoff, tags_code, store_ts, ppos, plen = last
            self.checkpoint.logics_msg_timestamp = store_ts
            if notify:
                props = codec.string_to_message_properties(view[ppos: ppos + plen])
                self._notify(topic, queue_id, qoff + 1, tags_code, store_ts, props)
        return new_pos

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
            self._dispatch_entry(
                msg.topic, msg.queue_id, ar.logics_offset, phy, ar.wrote_bytes, tx,
                ar.store_timestamp, codec.tags_code(tags) if tags else 0, props.get(mc.PROPERTY_KEYS),
                props.get(mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
                props if self.message_arriving_listener is not None else None)
            self.reput_from_offset = phy + ar.wrote_bytes
        return True

    def _dispatch_entry(self, topic: str, queue_id: int, queue_offset: int, phy: int, size: int,
                        tx: int, store_ts: int, tags_code: int, keys: str | None,
                        uniq: str | None, props: dict | None) -> None:
        """Consume-queue entry, index keys and arrival notification of one
        ordinary record (``_dispatch_put``'s half of ``_dispatch``)."""
        qs = self.consume_queue_table.get(topic)
        cq = qs.get(queue_id) if qs is not None else None
        if cq is None:
            cq = self.find_consume_queue(topic, queue_id)
        if cq.put_message_position_info(phy, size, tags_code, queue_offset):
            self.checkpoint.logics_msg_timestamp = store_ts
        else:
            self.running_flags.make_logics_queue_error()
        if (keys or uniq) and self.config.messageIndexEnable:
            if not self.index_service.build_index(topic, phy, store_ts, keys, uniq):
                self.running_flags.make_index_file_error()
        if props is not None:
            self._notify(topic, queue_id, queue_offset + 1, tags_code, store_ts, props)

    def _dispatch(self, r: tuple, view) -> None:
        (_st, size, topic, queue_id, queue_offset, phy, sys_flag, store_ts, tags_code,
         keys, uniq, delay, props_pos, props_len, _prepared) = r
        tx = sys_flag & _TX_MASK
        if tx == _TX_NOT or tx == _TX_COMMIT:
            if delay is not None and topic == SCHEDULE_TOPIC:
                tags_code = self.commit_log.delay_tags_code(store_ts, delay)
            qs = self.consume_queue_table.get(topic)
            cq = qs.get(queue_id) if qs is not None else None
            if cq is None:
                cq = self.find_consume_queue(topic, queue_id)
            if cq.put_message_position_info(phy, size, tags_code, queue_offset):
                self.checkpoint.logics_msg_timestamp = store_ts
            else:
                self.running_flags.make_logics_queue_error()
        if (keys or uniq) and tx != _TX_ROLLBACK and self.config.messageIndexEnable:
            if not self.index_service.build_index(topic, phy, store_ts, keys, uniq):
                self.running_flags.make_index_file_error()
        if view is not None and (tx == _TX_NOT or tx == _TX_COMMIT):
            props = codec.string_to_message_properties(view[props_pos: props_pos + props_len])
            self._notify(topic, queue_id, queue_offset + 1, tags_code, store_ts, props)

    def _notify(self, topic: str, queue_id: int, next_offset: int, tags_code: int,
                store_ts: int, props: dict) -> None:
        """The arrival listener, on the loop's thread (directly when dispatch
        runs there, which is the put path's case)."""
        listener = self.message_arriving_listener
        loop = self._loop
        if loop is not None and threading.get_ident() != self._loop_thread and loop.is_running():
            loop.call_soon_threadsafe(listener, topic, queue_id, next_offset, tags_code,
                                      store_ts, props)
            return
        try:
            listener(topic, queue_id, next_offset, tags_code, store_ts, props)
        except Exception:  # noqa: BLE001 - a listener bug must not stop dispatch
            log.exception("message arriving listener failed")

    def dispatch_behind_bytes(self) -> int:
        return max(0, self.commit_log.get_max_offset() - self.reput_from_offset)

    # ======================================================================
    # reads
    # ======================================================================
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
        return None

    # ======================================================================
    # status
    # ======================================================================
    def get_min_phy_offset(self) -> int:
        return self.commit_log.get_min_offset()

    def get_max_phy_offset(self) -> int:
        return self.commit_log.get_max_offset()

    def is_os_page_cache_busy(self) -> bool:
        begin = self.commit_log.begin_time_in_lock
        return page_cache_busy(begin, _now_ms(), self.config.osPageCacheBusyTimeOutMills)

    def lock_time_mills(self) -> int:
        begin = self.commit_log.begin_time_in_lock
        return _now_ms() - begin if begin > 0 else 0

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
                   if t not in topics and t not in (SCHEDULE_TOPIC, TRANS_OP_HALF_TOPIC) and not is_retry_topic(t)}
        self.delete_topics(victims)
        return len(victims)

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
