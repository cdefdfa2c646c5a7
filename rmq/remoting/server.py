"""RemotingServer: the listening side (RocketMQ's ``NettyRemotingServer``).

Nothing here is broker-specific: the broker runs two instances (listenPort and
listenPort - 2) and the name server one.  Requests are dispatched by
``RemotingService``; this class owns the listening socket, server -> client
requests and the graceful stop.
"""

from __future__ import annotations

import asyncio
import logging
import socket

from rmq.remoting.abstract import ChannelEventListener, RemotingService
from rmq.remoting.channel import Channel, RemotingProtocol
from rmq.remoting.command import RemotingCommand
from rmq.remoting.config import NettyServerConfig

log = logging.getLogger("rmq.remoting")


class RemotingServer(RemotingService):
    """Serves the remoting protocol on ``config.bindAddress:config.listenPort``."""

    def __init__(self, config: NettyServerConfig, listener: ChannelEventListener | None = None,
                 name: str = "remoting") -> None:
        super().__init__(name, listener, config.serverChannelMaxIdleTimeSeconds)
        self.config = config
        self._server: asyncio.AbstractServer | None = None
        self._port = 0

    def _protocol(self) -> RemotingProtocol:
        return RemotingProtocol(self, self.config.frameMaxLength)

    def _listen_socket(self) -> socket.socket:
        cfg = self.config
        family = socket.AF_INET6 if ":" in cfg.bindAddress else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if cfg.serverSocketSndBufSize > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, cfg.serverSocketSndBufSize)
            if cfg.serverSocketRcvBufSize > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, cfg.serverSocketRcvBufSize)
            sock.bind((cfg.bindAddress, cfg.listenPort))
            sock.listen(cfg.serverSocketBacklog)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        return sock

    async def start(self) -> None:
        """Bind and start accepting; ``port`` then holds the bound port."""
        loop = asyncio.get_running_loop()
        sock = self._listen_socket()
        self._port = sock.getsockname()[1]
        self._server = await loop.create_server(self._protocol, sock=sock)
        self._start_idle_scan()
        log.info("%s: listening on %s:%d", self.name, self.config.bindAddress, self._port)

    @property
    def port(self) -> int:
        return self._port

    @property
    def channels(self) -> frozenset[Channel]:
        return frozenset(self._channels)

    async def invoke(self, channel: Channel, request: RemotingCommand,
                     timeout_ms: int) -> RemotingCommand:
        """Send a request to a connected client and wait for its answer."""
        return await self._invoke_channel(channel, request, timeout_ms)

    def invoke_oneway(self, channel: Channel, request: RemotingCommand) -> None:
        request.mark_oneway()
        channel.write(request)

    async def stop(self, grace_seconds: float = 5.0) -> None:
        """Stop accepting, let in-flight requests finish (up to
        ``grace_seconds``), then close every connection."""
        if self._server is not None:
            self._server.close()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace_seconds)
        for task in list(self._tasks):
            task.cancel()
        await self._stop_idle_scan()
        for channel in list(self._channels):
            channel.close()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        await asyncio.sleep(0)
        log.info("%s: stopped", self.name)
