"""A slow store for tests: the rmq-only broker setting ``rmqTestPutDelayMillis``.

Fast failure only shows on a broker whose store puts are slow (a commit-log
append stuck on page faults in Java).  With ``rmqTestPutDelayMillis > 0``
every request of the send pool first takes a simulated commit-log lock and
holds it that long, without blocking the event loop, before its processor
runs and stores the message: sends then wait in the send queue behind it,
other pools keep being served, and the page cache counts as busy once the
lock has been held longer than ``osPageCacheBusyTimeOutMills`` -- what
``DefaultMessageStore.isOSPageCacheBusy`` reports in that situation.

The setting is read on every request while it is on, and UPDATE_BROKER_CONFIG
can switch it on and off on a running broker: the broker hands ``active`` to
its send pool only while the setting is above 0
(``BrokerController.on_put_delay_changed``), so 0 (the default) costs a send
nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


def _now_ms() -> float:
    return time.monotonic() * 1000.0


class PutDelay:
    """The simulated commit-log lock held by slowed puts."""

    def __init__(self, delay_ms: Callable[[], int], busy_timeout_ms: Callable[[], int]) -> None:
        self.delay_ms = delay_ms
        self.busy_timeout_ms = busy_timeout_ms
        self._lock = asyncio.Lock()
        self._begin_ms = 0.0

    def active(self) -> bool:
        return self.delay_ms() > 0

    async def hold(self) -> None:
        """Take the lock and keep it for the configured delay (one put)."""
        async with self._lock:
            self._begin_ms = _now_ms()
            try:
                await asyncio.sleep(self.delay_ms() / 1000.0)
            finally:
                self._begin_ms = 0.0

    def lock_time_ms(self) -> int:
        """How long the current holder has held the lock (0 when free)."""
        begin = self._begin_ms
        return int(_now_ms() - begin) if begin else 0

    def page_cache_busy(self) -> bool:
        held = self.lock_time_ms()
        return held > 0 and held > self.busy_timeout_ms()
