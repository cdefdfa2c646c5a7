"""run_eagerly: a coroutine stepped at once, handed to a task only if it suspends."""

from __future__ import annotations

import asyncio

import pytest

from rmq.common.eager import run_eagerly


async def _done_at_once(trace: list[str]) -> str:
    trace.append("ran")
    return "answer"


async def _suspends(trace: list[str], fut: asyncio.Future) -> str:
    trace.append("before")
    value = await fut
    trace.append("after")
    return f"got {value}"


async def _fails_at_once() -> None:
    raise ValueError("bad header")


async def _fails_later(fut: asyncio.Future) -> None:
    await fut
    raise KeyError("later")


def test_a_coroutine_that_does_not_suspend_gives_its_result_in_the_same_turn() -> None:
    async def main() -> None:
        trace: list[str] = []
        result = run_eagerly(_done_at_once(trace))
        assert result == "answer"
        assert trace == ["ran"]

    asyncio.run(main())


def test_a_coroutine_that_suspends_goes_on_in_a_task() -> None:
    async def main() -> None:
        trace: list[str] = []
        fut = asyncio.get_running_loop().create_future()
        task = run_eagerly(_suspends(trace, fut))
        assert isinstance(task, asyncio.Task)
        assert trace == ["before"]  # the first step ran before the call returned
        fut.set_result(7)
        assert await task == "got 7"
        assert trace == ["before", "after"]

    asyncio.run(main())


def test_an_exception_of_the_first_step_is_raised_by_the_call() -> None:
    async def main() -> None:
        with pytest.raises(ValueError, match="bad header"):
            run_eagerly(_fails_at_once())

    asyncio.run(main())


def test_an_exception_after_suspending_ends_the_task() -> None:
    async def main() -> None:
        fut = asyncio.get_running_loop().create_future()
        task = run_eagerly(_fails_later(fut))
        fut.set_result(None)
        with pytest.raises(KeyError):
            await task

    asyncio.run(main())


def test_cancelling_the_task_cancels_what_the_coroutine_waits_for() -> None:
    async def main() -> None:
        trace: list[str] = []
        fut = asyncio.get_running_loop().create_future()
        task = run_eagerly(_suspends(trace, fut))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert fut.cancelled()
        assert trace == ["before"]

    asyncio.run(main())


def test_an_exception_thrown_in_is_seen_by_the_coroutine() -> None:
    async def catches(fut: asyncio.Future) -> str:
        try:
            await asyncio.wait_for(fut, 0.01)
        except TimeoutError:
            return "timed out"
        return "no timeout"

    async def main() -> None:
        fut = asyncio.get_running_loop().create_future()
        task = run_eagerly(catches(fut))
        assert await task == "timed out"

    asyncio.run(main())
