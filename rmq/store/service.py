"""ServiceThread: a named thread with one loop, ``wakeup`` and ``shutdown``
(the shape of RocketMQ's ``ServiceThread``)."""

from __future__ import annotations

import logging
import threading

from rmq.common.threads import set_native_thread_name

log = logging.getLogger("store")


class ServiceThread:
    name = "ServiceThread"

    def __init__(self) -> None:
        self._stopped = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._main, name=self.name, daemon=True)
            self._thread.start()

    def _main(self) -> None:
        # named for the kernel too: top -H, perf and the benchmarks' per-thread
        # CPU tell the services apart only by it
        set_native_thread_name(self.name)
        try:
            self.run()
        except Exception:  # noqa: BLE001 - a service must log, not vanish silently
            log.exception("%s service has exception", self.name)

    def run(self) -> None:
        raise NotImplementedError

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def wakeup(self) -> None:
        if not self._wake.is_set():  # set() takes the condition lock every time
            self._wake.set()

    def wake_for(self, written: int, now_ms: int) -> None:
        """A put moved the appends to ``written`` at ``now_ms``: wake the
        service (a service that can tell a round would do nothing then
        leaves itself asleep, FlushRealTimeService)."""
        self.wakeup()

    def wait_for_running(self, interval_s: float) -> None:
        """Sleep up to ``interval_s`` or until woken; clears the wake flag."""
        self._wake.wait(interval_s)
        self._wake.clear()
        self.on_wait_end()

    def on_wait_end(self) -> None:
        """Hook run after every wait (GroupCommitService swaps its lists here)."""

    def shutdown(self, timeout: float = 10.0) -> None:
        self._stopped.set()
        self._wake.set()
        t, self._thread = self._thread, None
        if t is not None and t is not threading.current_thread():
            t.join(timeout)
