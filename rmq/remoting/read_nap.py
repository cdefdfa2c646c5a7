"""Read naps: after a read that brought a client's requests in a stream, the
event loop sleeps a short while before it polls its sockets again, so that
the next read brings many requests instead of one.

A client with several requests in flight (an async producer, the Java
benchmark Producer at 16 or 64) sends the next request as soon as an answer
reaches it.  A broker that answers faster than the client sends then reads
one or two requests at a time: every read pays a wake-up, a ``recv``, a
``send`` of the answers and the loop's turn, which cost more than the
requests themselves.  Sleeping ``window_us`` after such a read (the timer
slack of the loop's thread cut to 1 µs, else the kernel's default 50 µs
would come on top) lets the requests that arrive meanwhile wait in the
socket: the next read takes all of them, the answers go in one write, and
the client, getting them together, sends in bursts too.  Both sides spend
less per message; a request's round trip grows by up to the window, which
costs a client with CPU to spare some of its rate and gains one short of
CPU some (bench/RESULTS.md, "Read naps").

Only a read holding more than one frame (the first whole and part of the
next at least) asks for a nap: a client with one request in flight never
sends a second before its answer, so its reads hold one frame each and it
never waits on a nap.  Nor does a read of ``ENOUGH_FRAMES`` or more: its
wake-up and calls are shared enough already (a client writing a turn's
requests together, the SDK's 32 a write), and a nap would only add its
own.  A nap happens once per turn of the loop however many connections
asked, after the turn's reads were answered.

A loop that is busy needs no nap: its reads take many requests already, and
a sleep would only take time from them.  So a nap is taken only when the
last one (or the last decision not to take one) was less than
``BUSY_WINDOWS`` windows ago: in a dense stream of short turns, not when
turns are long (a loaded broker) or streaming reads are rare.

Sleeping blocks the loop, so a nap only suits a broker whose sends are
answered within the read that brought them: with DLedger, a SYNC_MASTER or
SYNC_FLUSH the answers wait for another socket (a follower's, a slave's) or
the flush, which the nap would delay.  ``rmq.broker.controller`` decides."""

from __future__ import annotations

import asyncio
import ctypes
import time

# a nap is skipped when the last nap, or skip, is this many windows ago or more
BUSY_WINDOWS = 4
# a read of this many frames needs no nap (a read's frames are counted up to it)
ENOUGH_FRAMES = 16
PR_SET_TIMERSLACK = 29  # <linux/prctl.h>
TIMER_SLACK_NS = 1000


def frames_ahead(buf: bytearray, start: int, end: int, cap: int) -> int:
    """The frames pending in ``buf`` from ``start`` to ``end``, the last
    one's part counted whole, at most ``cap``: what a read tells a pacer
    (the twin of ``rmq._fast.protocol_reads``' own, which a compiled read
    calls)."""
    count = 0
    while start < end and count < cap:
        count += 1
        if end - start < 4:
            break
        start += 4 + int.from_bytes(buf[start:start + 4], "big")
    return count


def _tight_timer_slack() -> bool:
    """The calling thread's timer slack set to ``TIMER_SLACK_NS`` (Linux's
    ``PR_SET_TIMERSLACK``; it is per thread): a nap then lasts its window,
    not the window and the default 50 µs the kernel may add to let wake-ups
    coincide.  False where that cannot be set."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_TIMERSLACK, TIMER_SLACK_NS, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


class ReadNap:
    """Sleeps ``window_us`` at the end of a loop turn in which a read held
    more than one frame and fewer than ``ENOUGH_FRAMES``, unless the turns
    are long; counts the naps taken.  Made on the loop's thread: its timer
    slack is cut there."""

    __slots__ = ("_loop", "_window", "_busy", "_last", "_asked", "naps")

    def __init__(self, loop: asyncio.AbstractEventLoop, window_us: int) -> None:
        self._loop = loop
        self._window = window_us / 1e6
        self._busy = BUSY_WINDOWS * self._window
        self._last = 0.0  # when the last nap ended, or the last was skipped
        self._asked = False
        self.naps = 0
        _tight_timer_slack()

    def touch(self, frames: int) -> None:
        """A read happened, of ``frames`` (counted up to ``ENOUGH_FRAMES``)."""
        if 1 < frames < ENOUGH_FRAMES and not self._asked:
            self._asked = True
            self._loop.call_soon(self._after_turn)

    def _after_turn(self) -> None:
        # one more hop: what the turn's reads queued (answers' flushes,
        # the general path's task steps) runs before the loop sleeps
        self._loop.call_soon(self._nap)

    def _nap(self) -> None:
        self._asked = False
        now = time.perf_counter()
        if now - self._last < self._busy:
            self.naps += 1
            time.sleep(self._window)
            now = time.perf_counter()
        self._last = now
