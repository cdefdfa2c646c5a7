"""Commit log flush and commit services and the consume queue flusher
(STORE_FORMAT.md 10.2-10.4, 10.6): FlushRealTimeService (ASYNC_FLUSH),
GroupCommitService (SYNC_FLUSH), CommitRealTimeService (transient store
pool) and FlushConsumeQueueService.  All are threads; msync/fdatasync release
the GIL.  Results go back to waiters through ``concurrent.futures.Future``,
which the event loop awaits with ``asyncio.wrap_future``.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future

from rmq.store.results import PutMessageStatus
from rmq.store.service import ServiceThread


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class FlushRealTimeService(ServiceThread):
    name = "FlushRealTimeService"

    def __init__(self, store) -> None:
        super().__init__()
        self.store = store
        self.last_flush_timestamp = 0

    def run(self) -> None:
        cfg = self.store.config
        mfq = self.store.commit_log.mfq
        while not self.stopped:
            least = cfg.flushCommitLogLeastPages
            now = _now_ms()
            if now >= self.last_flush_timestamp + cfg.flushCommitLogThoroughInterval:
                self.last_flush_timestamp = now
                least = 0
            if cfg.flushCommitLogTimed:
                self._stopped.wait(cfg.flushIntervalCommitLog / 1000)
            else:
                self.wait_for_running(cfg.flushIntervalCommitLog / 1000)
            mfq.flush(least)
            if mfq.store_timestamp > 0:
                self.store.checkpoint.physic_msg_timestamp = mfq.store_timestamp
        for _ in range(10):
            if mfq.flush(0):
                break


class GroupCommitRequest:
    __slots__ = ("next_offset", "future", "deadline")

    def __init__(self, next_offset: int, timeout_ms: int) -> None:
        self.next_offset = next_offset
        self.future: Future = Future()
        self.deadline = _now_ms() + timeout_ms


class GroupCommitService(ServiceThread):
    """SYNC_FLUSH group commit: every request waiting in one round is
    answered by one flush."""

    name = "GroupCommitService"

    def __init__(self, store) -> None:
        super().__init__()
        self.store = store
        self._lock = threading.Lock()
        self._write: list[GroupCommitRequest] = []
        self._read: list[GroupCommitRequest] = []

    def put_request(self, req: GroupCommitRequest) -> None:
        with self._lock:
            self._write.append(req)
        self.wakeup()

    def on_wait_end(self) -> None:
        with self._lock:
            self._write, self._read = self._read, self._write

    def _do_commit(self) -> None:
        mfq = self.store.commit_log.mfq
        reqs = self._read
        if reqs:
            for req in reqs:
                ok = mfq.flushed_where >= req.next_offset
                for _ in range(2):
                    if ok:
                        break
                    mfq.flush(0)
                    ok = mfq.flushed_where >= req.next_offset
                status = PutMessageStatus.PUT_OK if ok else PutMessageStatus.FLUSH_DISK_TIMEOUT
                if not req.future.done():
                    req.future.set_result(status)
            if mfq.store_timestamp > 0:
                self.store.checkpoint.physic_msg_timestamp = mfq.store_timestamp
            self._read = []
        else:
            mfq.flush(0)

    def run(self) -> None:
        while not self.stopped:
            self.wait_for_running(0.010)
            self._do_commit()
        time.sleep(0.010)
        self.on_wait_end()
        self._do_commit()


class CommitRealTimeService(ServiceThread):
    """Moves bytes from transient write buffers into the mapped files; each
    commit that moved data wakes the flusher and triggers dispatch."""

    name = "CommitRealTimeService"

    def __init__(self, store) -> None:
        super().__init__()
        self.store = store
        self.last_commit_timestamp = 0

    def run(self) -> None:
        cfg = self.store.config
        mfq = self.store.commit_log.mfq
        while not self.stopped:
            least = cfg.commitCommitLogLeastPages
            now = _now_ms()
            if now >= self.last_commit_timestamp + cfg.commitCommitLogThoroughInterval:
                self.last_commit_timestamp = now
                least = 0
            if not mfq.commit(least):
                self.last_commit_timestamp = now
                self.store.flush_service.wakeup()
                self.store.on_committed()
            self.wait_for_running(cfg.commitIntervalCommitLog / 1000)
        for _ in range(10):
            if mfq.commit(0):
                break
        self.store.on_committed()


class FlushConsumeQueueService(ServiceThread):
    name = "FlushConsumeQueueService"

    def __init__(self, store) -> None:
        super().__init__()
        self.store = store
        self.last_flush_timestamp = 0

    def do_flush(self, retry: int) -> None:
        cfg = self.store.config
        least = cfg.flushConsumeQueueLeastPages
        if retry == 3:
            least = 0
        logics_ts = 0
        now = _now_ms()
        if now >= self.last_flush_timestamp + cfg.flushConsumeQueueThoroughInterval:
            self.last_flush_timestamp = now
            least = 0
            logics_ts = self.store.checkpoint.logics_msg_timestamp
        for cq in self.store.all_consume_queues():
            for _ in range(retry):
                if cq.flush(least):
                    break
        if least == 0:
            if logics_ts > 0:
                self.store.checkpoint.logics_msg_timestamp = logics_ts
            self.store.checkpoint.flush()

    def run(self) -> None:
        cfg = self.store.config
        while not self.stopped:
            self.wait_for_running(cfg.flushIntervalConsumeQueue / 1000)
            self.do_flush(1)
        self.do_flush(3)
