"""ReadNap sleeps once at the end of a loop turn in which a read held more
than one frame (and fewer than ENOUGH_FRAMES), after what that turn queued,
when such turns come close together; reads of one frame never make the
loop sleep, nor do reads of enough frames, long turns or a stream's pauses."""

from __future__ import annotations

import asyncio
import time

import pytest

from rmq.remoting.read_nap import ENOUGH_FRAMES, ReadNap

pytestmark = pytest.mark.timeout(30)


async def _turns(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_reads_of_one_frame_take_no_nap():
    nap = ReadNap(asyncio.get_running_loop(), 50_000)
    t0 = time.perf_counter()
    for _ in range(100):
        nap.touch(1)
    await _turns(5)
    assert nap.naps == 0 and time.perf_counter() - t0 < 0.05


async def test_one_nap_a_turn_after_what_the_turn_queued():
    loop = asyncio.get_running_loop()
    nap = ReadNap(loop, 20_000)  # 20 ms: a stream's turns come within 80 ms
    nap.touch(2)  # a stream's first streaming turn: no nap before one to follow
    await _turns(5)
    assert nap.naps == 0
    seen: list = []
    nap.touch(2)
    nap.touch(2)  # a second streaming read of the same turn: no second nap
    loop.call_soon(lambda: seen.append(("answers flushed", nap.naps)))
    t0 = time.perf_counter()
    await _turns(5)
    assert seen == [("answers flushed", 0)]  # queued after the touch, run before the nap
    assert nap.naps == 1 and time.perf_counter() - t0 >= 0.02
    nap.touch(2)  # the next turn's streaming read naps again
    await _turns(5)
    assert nap.naps == 2


async def test_reads_of_enough_frames_take_no_nap():
    nap = ReadNap(asyncio.get_running_loop(), 10_000)
    nap.touch(2)
    await _turns(5)
    for frames in (ENOUGH_FRAMES, ENOUGH_FRAMES, ENOUGH_FRAMES - 1):
        nap.touch(frames)
        await _turns(5)
    assert nap.naps == 1  # the last: a read of fewer


async def test_no_nap_after_a_long_turn_or_a_quiet_while():
    """A turn that took four windows (a busy loop, reads long enough) or a
    stream that paused as long: no nap; the stream's next turn naps."""
    loop = asyncio.get_running_loop()
    nap = ReadNap(loop, 10_000)  # 10 ms
    nap.touch(2)
    await _turns(5)
    nap.touch(2)
    await _turns(5)
    assert nap.naps == 1
    nap.touch(2)
    time.sleep(0.05)  # this turn's work: five windows
    await _turns(5)
    assert nap.naps == 1
    nap.touch(2)
    await _turns(5)
    assert nap.naps == 2
    await asyncio.sleep(0.05)  # the stream pauses
    nap.touch(2)
    await _turns(5)
    assert nap.naps == 2


def test_the_loop_threads_timer_slack_is_cut():
    """A nap lasts its window: the thread that makes the ReadNap (the
    loop's) gets a 1 µs timer slack; other threads keep theirs."""
    import ctypes
    import threading

    libc = ctypes.CDLL(None, use_errno=True)
    pr_get_timerslack = 30
    mine = libc.prctl(pr_get_timerslack, 0, 0, 0, 0)
    seen: list[int] = []

    def make() -> None:
        loop = asyncio.new_event_loop()
        try:
            ReadNap(loop, 100)
            seen.append(libc.prctl(pr_get_timerslack, 0, 0, 0, 0))
        finally:
            loop.close()

    t = threading.Thread(target=make)
    t.start()
    t.join(10)
    assert seen == [1000]
    assert libc.prctl(pr_get_timerslack, 0, 0, 0, 0) == mine
