"""Commit log flush and commit services and the consume queue flusher
(STORE_FORMAT.md 10.2-10.4, 10.6): FlushRealTimeService (ASYNC_FLUSH),
GroupCommitService (SYNC_FLUSH), CommitRealTimeService (transient store
pool) and FlushConsumeQueueService.  All are threads; msync/fdatasync release
the GIL.

Group commit has two kinds of waiters.  Puts on the event loop register a
callback in a loop-owned queue (``wait_on_loop``): the flush thread answers a
whole round with one ``call_soon_threadsafe`` after each flush, and one loop
timer expires what waited past ``syncFlushTimeout`` -- no thread-pool future,
no ``wait_for`` task per message.  Callers without a loop (tools, the Spark
generator) block on a ``concurrent.futures.Future`` (``put_request``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future

from rmq.store.mapped_file import OS_PAGE_SIZE
from rmq.store.results import PutMessageStatus
from rmq.store.service import ServiceThread


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class FlushRealTimeService(ServiceThread):
    """ASYNC_FLUSH: each round waits up to flushIntervalCommitLog (or until a
    put wakes it) and flushes when flushCommitLogLeastPages pages are
    pending, everything every flushCommitLogThoroughInterval."""

    name = "FlushRealTimeService"

    def __init__(self, store) -> None:
        super().__init__()
        self.store = store
        self.last_flush_timestamp = 0
        # the round now waiting flushes everything (read by wake_for)
        self._thorough_round = False

    def wake_for(self, written: int, now_ms: int) -> None:
        """After a put (flushCommitLogTimed off): wake the round now waiting
        only when it would flush -- its least pages written past the flushed
        position (or, for the thorough round, anything), or the thorough
        interval over by ``now_ms``.  4.9.8 wakes the thread after every
        put, and a round woken with fewer pages pending flushes nothing and
        waits again; left asleep, no byte reaches the disk later, and a
        sender with one request in flight costs no thread wake-up and
        hand-over of the interpreter per message."""
        if self._wake.is_set():
            return
        cfg = self.store.config
        mfq = self.store.commit_log.mfq
        flushed = mfq.flushed_where
        least = 0 if self._thorough_round else cfg.flushCommitLogLeastPages
        if least > 0:
            due = written // OS_PAGE_SIZE - flushed // OS_PAGE_SIZE >= least or \
                written // mfq.mapped_file_size != flushed // mfq.mapped_file_size  # a full file's tail
        else:
            due = written > flushed
        if due or now_ms >= self.last_flush_timestamp + cfg.flushCommitLogThoroughInterval:
            self._wake.set()

    def run(self) -> None:
        cfg = self.store.config
        mfq = self.store.commit_log.mfq
        while not self.stopped:
            least = cfg.flushCommitLogLeastPages
            now = _now_ms()
            if now >= self.last_flush_timestamp + cfg.flushCommitLogThoroughInterval:
                self.last_flush_timestamp = now
                least = 0
            self._thorough_round = least <= 0
            if cfg.flushCommitLogTimed:
                self._stopped.wait(cfg.flushIntervalCommitLog / 1000)
            else:
                self.wait_for_running(cfg.flushIntervalCommitLog / 1000)
            mfq.flush(least)
            if mfq.store_timestamp > 0:
                self.store.checkpoint.physic_msg_timestamp = mfq.store_timestamp
            mfq.populate_ahead()
        for _ in range(10):
            if mfq.flush(0):
                break


class GroupCommitRequest:
    __slots__ = ("next_offset", "future", "deadline")

    def __init__(self, next_offset: int, timeout_ms: int) -> None:
        self.next_offset = next_offset
        self.future: Future = Future()
        self.deadline = _now_ms() + timeout_ms


LoopDone = Callable[[object, PutMessageStatus], None]


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
        # loop side: (next offset, deadline ms, token, done) in offset order;
        # touched only on the loop.  ``requested`` (written by the loop, read
        # by the thread) is the highest offset a loop waiter needs flushed.
        self._loop_waiters: deque[tuple[int, int, object, LoopDone]] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.requested = 0
        self._answered = 0  # thread side: flushed offset last sent to the loop

    def put_request(self, req: GroupCommitRequest) -> None:
        with self._lock:
            self._write.append(req)
        self.wakeup()

    # ---- loop-side waiters -------------------------------------------------------
    def wait_on_loop(self, loop: asyncio.AbstractEventLoop, next_offset: int, timeout_ms: int,
                     token: object, done: LoopDone) -> None:
        """Call ``done(token, status)`` on ``loop`` once the commit log is flushed
        up to ``next_offset`` (PUT_OK) or ``timeout_ms`` passed (FLUSH_DISK_TIMEOUT)."""
        self._loop = loop
        if next_offset <= self.store.commit_log.mfq.flushed_where:
            done(token, PutMessageStatus.PUT_OK)
            return
        self._loop_waiters.append((next_offset, _now_ms() + timeout_ms, token, done))
        if next_offset > self.requested:
            self.requested = next_offset
        if not self._wake.is_set():
            self._wake.set()
        if self._timer is None:
            self._timer = loop.call_later(timeout_ms / 1000, self._expire)

    def _resolve(self, flushed: int) -> None:
        """Loop side: answer every waiter the flush covered."""
        waiters = self._loop_waiters
        ok = PutMessageStatus.PUT_OK
        while waiters and waiters[0][0] <= flushed:
            _, _, token, done = waiters.popleft()
            done(token, ok)

    def _expire(self) -> None:
        """Loop side: FLUSH_DISK_TIMEOUT for the waiters past their deadline;
        re-armed for the oldest one left."""
        self._timer = None
        self._resolve(self.store.commit_log.mfq.flushed_where)
        waiters = self._loop_waiters
        now = _now_ms()
        timeout = PutMessageStatus.FLUSH_DISK_TIMEOUT
        while waiters and waiters[0][1] <= now:
            _, _, token, done = waiters.popleft()
            done(token, timeout)
        if waiters and self._loop is not None:
            self._timer = self._loop.call_later(max(0, waiters[0][1] - now) / 1000,
                                                self._expire)

    def _answer_loop(self) -> None:
        """Thread side: one wake-up of the loop per flush that covered waiters."""
        flushed = self.store.commit_log.mfq.flushed_where
        loop = self._loop
        if loop is None or flushed <= self._answered or self._answered >= self.requested:
            return
        self._answered = flushed
        try:
            loop.call_soon_threadsafe(self._resolve, flushed)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    def on_wait_end(self) -> None:
        with self._lock:
            self._write, self._read = self._read, self._write

    def _do_commit(self) -> bool:
        """One round: a flush up to what is written, the loop's waiters it
        covered answered at once (waiters that came during the flush are the
        next round's, which starts without sleeping), then the thread-side
        requests.  False when loop waiters are left and the flush moved
        nothing (the next round then waits instead of spinning)."""
        mfq = self.store.commit_log.mfq
        moved = True
        if self.requested > mfq.flushed_where:
            before = mfq.flushed_where
            mfq.flush(0)
            moved = mfq.flushed_where != before
        self._answer_loop()
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
        return moved

    def run(self) -> None:
        mfq = self.store.commit_log.mfq
        more = False
        while not self.stopped:
            if more and self.requested > mfq.flushed_where:
                self._wake.clear()  # waiters came during the last flush: no sleep
                self.on_wait_end()
            else:
                self.wait_for_running(0.010)
            more = self._do_commit()
            mfq.populate_ahead()
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
            if retry == 1:  # (a round, not the last flush at shutdown)
                cq.keep_room()
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
