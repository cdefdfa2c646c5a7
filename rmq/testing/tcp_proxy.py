"""A TCP proxy on loopback that a test can cut and heal: the network link
between two nodes, for partition tests."""

from __future__ import annotations

import asyncio
import contextlib


class TcpProxy:
    """Forwards connections from its own port to ``target_port``; ``cut()``
    drops every connection and refuses new ones until ``heal()``."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.open = True
        self._server: asyncio.base_events.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def cut(self) -> None:
        self.open = False
        for w in list(self._writers):
            w.transport.abort()
        self._writers.clear()

    def heal(self) -> None:
        self.open = True

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.open:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update((writer, up_writer))
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer),
                             return_exceptions=True)

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while self.open and (data := await reader.read(65536)):
                writer.write(data)
                await writer.drain()
        finally:
            self._writers.discard(writer)
            with contextlib.suppress(Exception):
                writer.transport.abort()
