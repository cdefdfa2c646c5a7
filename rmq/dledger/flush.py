"""DLedgerFlushDataService: a member's entry files flushed every
``flushFileInterval`` and its checkpoint persisted every 3 s, on a thread of
its own (DLedger's ``FlushDataService``).

On the event loop, each 10 ms round was a timer, a task step and a hand-over
to the default executor and back (a future chained across threads, which
wakes the loop through its self-pipe): about a hundred loop wake-ups a
second that a leader under load paid beside its sends.  The flush waits for
the disk and the loop never waits for it, so the thread is all it needs.
"""

from __future__ import annotations

import logging
import time

from rmq.store.service import ServiceThread

log = logging.getLogger("rmq.dledger")

CHECKPOINT_S = 3.0  # DLedgerConfig.checkPointInterval


class FlushDataService(ServiceThread):
    name = "DLedgerFlushDataService"

    def __init__(self, store, interval_ms: int) -> None:
        """``store``: a ``DLedgerMmapFileStore``, flushed whenever it is
        ``dirty`` at the end of each wait of ``interval_ms``."""
        super().__init__()
        self.store = store
        self.interval_s = interval_ms / 1000
        self._last_checkpoint = time.monotonic()

    def run(self) -> None:
        while not self._stopped.wait(self.interval_s):
            try:
                self.flush_round(time.monotonic())
            except Exception:  # noqa: BLE001 - a failed round (a full disk, ...): the next tries again
                log.exception("%s round failed", self.name)

    def flush_round(self, now: float) -> None:
        """One round: the files flushed if anything is written past the
        flushed position, the checkpoint persisted when ``CHECKPOINT_S``
        have passed since the last one."""
        store = self.store
        if store.dirty():
            store.flush()
        if now - self._last_checkpoint > CHECKPOINT_S:
            self._last_checkpoint = now
            store.persist_checkpoint()
