"""Loop-side periodic work: one step after an initial delay, then one every
period, until shut down.

RocketMQ 4.9.8 runs its housekeeping scans and scheduled tasks on
single-thread ``ScheduledExecutorService``s (``scheduleAtFixedRate``); here
they share the event loop.  A step that raises is logged and the next one
still runs, as a Java scheduled task survives only if its body catches
everything, which every one of them does.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable

_default_log = logging.getLogger(__name__)



async def cancel_and_wait(task: asyncio.Task | None) -> None:
    """Cancel ``task`` (if any) and wait until it has finished unwinding, so
    nothing of it runs after the caller's shutdown step."""
    if task is None:
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass


class PeriodicService:
    """Subclasses set ``interval_s`` and ``failure_message`` and implement
    ``run_once`` (plain or ``async``); the first step runs one interval after
    ``start``.  Override ``initial_delay_s``/``period_s`` for a different
    first delay or a period read afresh each time (runtime config changes)."""

    interval_s: float
    failure_message: str

    def __init__(self, name: str | None = None, logger: logging.Logger | None = None) -> None:
        self.name = name or type(self).__name__
        self.log = logger if logger is not None else _default_log
        self._task: asyncio.Task | None = None

    def run_once(self) -> Awaitable[None] | None:
        raise NotImplementedError

    def initial_delay_s(self) -> float:
        return self.interval_s

    def period_s(self) -> float:
        return self.interval_s

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    async def shutdown(self) -> None:
        """Cancel the loop and wait for it (a step in progress is cancelled too)."""
        task, self._task = self._task, None
        await cancel_and_wait(task)

    def idle_wait(self) -> Awaitable[None] | None:
        """None when a step is due; else what to await instead of it (a
        service with nothing to do sleeps until there is), after which the
        next step comes one period later."""
        return None

    async def _run(self) -> None:
        await asyncio.sleep(self.initial_delay_s())
        while True:
            idle = self.idle_wait()
            if idle is not None:
                await idle
            else:
                try:
                    result = self.run_once()
                    if inspect.isawaitable(result):
                        await result
                except Exception:
                    self.log.exception(self.failure_message)
            await asyncio.sleep(self.period_s())


class ScheduledTask(PeriodicService):
    """A periodic step given as a function: ``action`` runs ``initial_s``
    seconds after start, then every ``period()`` seconds (called each time,
    so a period taken from a config follows runtime updates)."""

    def __init__(self, name: str, initial_s: float, period: Callable[[], float],
                 action: Callable[[], Awaitable[None] | None],
                 logger: logging.Logger | None = None) -> None:
        super().__init__(name, logger)
        self._initial_s = initial_s
        self._period = period
        self._action = action
        self.failure_message = f"scheduled task {name} failed"

    def initial_delay_s(self) -> float:
        return self._initial_s

    def period_s(self) -> float:
        return self._period()

    def run_once(self) -> Awaitable[None] | None:
        return self._action()
