"""AllocateMappedFileService: the next commit log file is created (and, with
``warmMapedFileEnable``, pre-faulted) on a thread before it is needed
(STORE_FORMAT.md 10.5).  Either way its first POPULATE_AHEAD_MIN bytes are
brought into the page cache there, so the first appends after a roll do not
stall on page-cache misses (the flush thread keeps filling from then on)."""

from __future__ import annotations

import logging
import os
from concurrent.futures import Future, ThreadPoolExecutor

from rmq.store.mapped_file import POPULATE_AHEAD_MIN, MappedFile, TransientStorePool

log = logging.getLogger("store")

WAIT_TIMEOUT_S = 5.0


class AllocateMappedFileService:
    def __init__(self, warm: bool = False) -> None:
        self._warm = warm
        self._pending: dict[str, Future] = {}
        self._executor: ThreadPoolExecutor | None = ThreadPoolExecutor(1, thread_name_prefix="AllocateMappedFileService")

    def _make(self, path: str, size: int, pool: TransientStorePool | None) -> MappedFile:
        mf = MappedFile(path, size, pool)
        if self._warm:
            mf.warm()
        else:
            mf.populate(POPULATE_AHEAD_MIN)
        return mf

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
        if mf is None:
            mf = self._make(path, size, pool)
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
