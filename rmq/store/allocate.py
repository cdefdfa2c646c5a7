"""AllocateMappedFileService: the next commit log file is created (and, with
``warmMapedFileEnable``, pre-faulted) on a thread before it is needed
(STORE_FORMAT.md 10.5).

The same thread populates commit-log pages ahead of the appends
(``MappedFile.populate``): the first POPULATE_AHEAD_MIN bytes of every file
it creates, then whatever the flush thread asks for each round, so neither
the event loop nor a flush waits for it.  It keeps the normal priority: it
takes the GIL between system calls, and a thread the scheduler favours less
would make the event loop wait for the GIL hand-over.
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import Future, ThreadPoolExecutor

from rmq.common.threads import set_native_thread_name
from rmq.store.mapped_file import POPULATE_AHEAD_MIN, MappedFile, TransientStorePool

log = logging.getLogger("store")

WAIT_TIMEOUT_S = 5.0
# write_blocks on the service's thread: the pause between its chunks
PREWRITE_PAUSE_S = 0.005
THREAD_NAME = "AllocateMappedFileService"


class AllocateMappedFileService:
    def __init__(self, warm: bool = False, populate: bool = True, prewrite: bool = False) -> None:
        self._warm = warm
        # False: the appender writes zeros ahead itself (CommitLog.zero_ahead),
        # and the page cache is filled no other way
        self._populate = populate
        # True (SYNC_FLUSH): every new file's blocks are written before use
        self._prewrite = prewrite
        self._pending: dict[str, Future] = {}
        self._populating: Future | None = None
        self._executor: ThreadPoolExecutor | None = ThreadPoolExecutor(
            1, thread_name_prefix=THREAD_NAME, initializer=set_native_thread_name,
            initargs=(THREAD_NAME,))

    def _make(self, path: str, size: int, pool: TransientStorePool | None,
              here: bool = True) -> MappedFile:
        """Create a file and pre-fault or populate it: here on the service's
        thread, or (``here`` False, a caller's thread) as a job for it."""
        mf = MappedFile(path, size, pool)
        if self._prewrite:
            try:  # a caller waiting for its file does not pause for other flushes
                mf.write_blocks(PREWRITE_PAUSE_S if here else 0.0)
            except OSError as e:  # the file works without it, its flushes cost more
                log.warning("writing the blocks of %s failed: %s", path, e)
        if self._warm:
            mf.warm()
        elif self._populate and here:
            mf.populate(POPULATE_AHEAD_MIN)
        elif self._populate:
            self.populate(mf, POPULATE_AHEAD_MIN)
        return mf

    def populate(self, mf: MappedFile, end: int) -> None:
        """Populate ``mf`` up to ``end`` on the service's thread.  One request
        at a time: one made while another runs is dropped (the flush thread
        asks again next round), so requests never queue up behind each other."""
        ex = self._executor
        if ex is None or not self._populate or mf.populated_to >= min(end, mf.file_size):
            return
        running = self._populating
        if running is not None and not running.done():
            return
        try:
            self._populating = ex.submit(mf.populate, end)
        except RuntimeError:  # shut down meanwhile
            pass

    def take(self, path: str, next_path: str, size: int, pool: TransientStorePool | None) -> MappedFile:
        """The file for ``path`` (pre-created if it was asked for earlier);
        ``next_path`` is then prepared in the background."""
        fut = self._pending.pop(path, None)
        mf = None
        if fut is not None:
            try:
                mf = fut.result(WAIT_TIMEOUT_S)
            except Exception as e:  # noqa: BLE001 - fall back to creating it here
                log.warning("pre-allocation of %s failed: %s", path, e)
        if mf is None:  # none was prepared: made here, populated on the service's thread
            mf = self._make(path, size, pool, here=False)
        elif pool is not None and mf.write_buffer is None:
            mf.attach_pool(pool)
        if self._executor is not None and next_path not in self._pending and not os.path.exists(next_path):
            # the pre-created file gets no write buffer: buffers are only lent at use
            self._pending[next_path] = self._executor.submit(self._make, next_path, size, None)
        return mf

    def shutdown(self) -> None:
        """Stop the thread and remove files prepared but never used."""
        ex, self._executor = self._executor, None
        if ex is not None:
            ex.shutdown(wait=True)
        for path, fut in self._pending.items():
            try:
                mf = fut.result(0)
                mf.close()
                os.unlink(path)
            except Exception:  # noqa: BLE001 - nothing to clean up
                pass
        self._pending.clear()
