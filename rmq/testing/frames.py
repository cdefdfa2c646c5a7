"""A raw connection's reader for tests that write request frames themselves
(several in one write, as a busy client does) and wait for the answers."""

from __future__ import annotations

import asyncio

from rmq.remoting.command import RemotingCommand


class FrameCollector(asyncio.Protocol):
    """Collects every answer frame by its opaque (``frames``); ``expect(n)``
    gives a future done once ``n`` more frames have arrived (failed if the
    broker closes the connection first)."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.frames: dict[int, bytes] = {}
        self.want = 0
        self.done: asyncio.Future | None = None

    def expect(self, n: int) -> asyncio.Future:
        self.want = len(self.frames) + n
        self.done = asyncio.get_running_loop().create_future()
        if n <= 0:
            self.done.set_result(None)
        return self.done

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while len(self.buf) >= 4:
            n = int.from_bytes(self.buf[:4], "big")
            if len(self.buf) < 4 + n:
                break
            frame = bytes(self.buf[:4 + n])
            del self.buf[:4 + n]
            self.frames[RemotingCommand.decode(frame[4:]).opaque] = frame
            if len(self.frames) >= self.want and self.done and not self.done.done():
                self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.done and not self.done.done():
            self.done.set_exception(ConnectionError(f"closed: {exc}"))
