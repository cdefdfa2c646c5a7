"""A loop-side service that runs one step every fixed interval until shut down
(the broker's housekeeping scans of RocketMQ 4.9.8 run on their own
single-thread schedulers; here they share the event loop)."""

from __future__ import annotations

import asyncio
import logging

from rmq.common.logging import BROKER_LOGGER_NAME

log = logging.getLogger(BROKER_LOGGER_NAME)


class PeriodicService:
    """Subclasses set ``interval_s`` and ``failure_message`` and implement
    ``run_once``; a step that raises is logged and the next one still runs."""

    interval_s: float
    failure_message: str

    def __init__(self) -> None:
        self._task: asyncio.Task | None = None

    def run_once(self) -> None:
        raise NotImplementedError

    async def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                self.run_once()
            except Exception:
                log.exception(self.failure_message)
