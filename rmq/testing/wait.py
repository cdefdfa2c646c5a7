"""Waiting on a condition instead of sleeping a fixed time: the one poll loop
of the test and benchmark harness, for async code and for blocking code."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from typing import Any


def _failure(timeout: float, what: str, last: AssertionError | None) -> AssertionError:
    message = f"condition not reached in {timeout} s{': ' + what if what else ''}"
    if last is not None:
        return AssertionError(f"{message} ({last})")
    return AssertionError(message)


async def wait_until(predicate: Callable[[], Any], timeout: float = 15.0, step: float = 0.05,
                     what: str = "") -> Any:
    """Poll ``predicate`` (plain or async) until it returns something true and
    return that; an AssertionError it raises counts as "not yet".  Fails with
    AssertionError after ``timeout`` seconds, naming ``what`` and the last
    assertion seen, so a test reads as one condition, not a sleep and a check."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: AssertionError | None = None
    while True:
        try:
            got = predicate()
            if inspect.isawaitable(got):
                got = await got
            if got:
                return got
        except AssertionError as e:
            last = e
        if loop.time() >= deadline:
            raise _failure(timeout, what, last)
        await asyncio.sleep(step)


def wait_until_blocking(predicate: Callable[[], Any], timeout: float = 15.0, step: float = 0.05,
                        what: str = "") -> Any:
    """``wait_until`` for synchronous code (Spark jobs, the interop drivers)."""
    deadline = time.monotonic() + timeout
    last: AssertionError | None = None
    while True:
        try:
            got = predicate()
            if got:
                return got
        except AssertionError as e:
            last = e
        if time.monotonic() >= deadline:
            raise _failure(timeout, what, last)
        time.sleep(step)
