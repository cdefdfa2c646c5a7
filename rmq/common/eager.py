"""Run a coroutine's first step at once, in the caller's turn of the loop.

A request processor written as a coroutine usually finishes without ever
suspending (a pop that finds messages, an ack: their store puts complete at
once under ASYNC_FLUSH).  Handing such a coroutine to the loop costs a Task,
a turn of the loop and the task's bookkeeping for nothing; ``run_eagerly``
steps it right away and returns its result when it is done, or a Task that
goes on from where it suspended (a held pop, a put waiting for the group
commit or the slave).  Python 3.12's eager task factory does the same for
every task; this one is used only where it was measured to matter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Generator
from typing import Any


def run_eagerly(coro: Coroutine[Any, Any, Any]) -> Any:
    """The coroutine's result if its first step finishes it, else a Task that
    completes with it.  An exception of the first step is raised here."""
    try:
        first = coro.send(None)
    except StopIteration as stop:
        return stop.value
    return asyncio.get_running_loop().create_task(_resume(coro, first))


async def _resume(coro: Coroutine[Any, Any, Any], first: Any) -> Any:
    return await _Resumed(coro, first)


class _Resumed:
    """An awaitable that goes on with a coroutine which has already yielded
    ``first`` (what it waits for), forwarding what the task sends or throws."""

    __slots__ = ("_coro", "_first")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self._coro = coro
        self._first = first

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, value = self._coro, self._first
        while True:
            try:
                sent = yield value
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # noqa: BLE001 - cancellation included: passed on
                try:
                    value = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    value = coro.send(sent)
                except StopIteration as stop:
                    return stop.value
