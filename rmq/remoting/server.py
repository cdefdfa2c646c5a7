"""RemotingServer: the listening side (RocketMQ's ``NettyRemotingServer``).

Nothing here is broker-specific: the broker runs two instances (listenPort and
listenPort - 2) and the name server one.  Requests are dispatched by
``RemotingService``; this class owns the listening socket, server -> client
requests, TLS sniffing and the graceful stop.

With ``tls.server.mode=disabled`` the loop's own server accepts connections
(a ClientHello then fails the frame-length check and closes the connection).
Otherwise rmq accepts itself, peeks at the first byte of each connection and
hands the socket to the loop as TLS (0x16) or plaintext, as 4.9.8's
``HandshakeHandler`` does; enforcing mode closes plaintext connections.  With
its own certificate (test mode off) the server watches the certificate files
and loads a rotated certificate for new connections (``tls_watch``).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl

from rmq.common.net import listen_error
from rmq.remoting.abstract import ChannelEventListener, RemotingService
from rmq.remoting.channel import Channel, RemotingProtocol
from rmq.remoting.command import RemotingCommand
from rmq.remoting.config import NettyServerConfig
from rmq.remoting.connection_limit import ConnectionLimiter, remote_host
from rmq.remoting.tls import TLS_HANDSHAKE_BYTE, TlsConfig, TlsMode, server_context
from rmq.remoting.tls_watch import CertificateWatch

log = logging.getLogger("rmq.remoting")


class RemotingServer(RemotingService):
    """Serves the remoting protocol on ``config.bindAddress:config.listenPort``."""

    # the fields every read of a connection asks (rmq._fast.protocol_reads
    # reads them at these slots; the rest stay in the instance dict)
    __slots__ = ("lane", "pacer", "_rpc_hooks", "rpc_latency")

    def __init__(self, config: NettyServerConfig, listener: ChannelEventListener | None = None,
                 name: str = "remoting", tls: TlsConfig | None = None,
                 limiter: ConnectionLimiter | None = None) -> None:
        super().__init__(name, listener, config.serverChannelMaxIdleTimeSeconds)
        self.config = config
        # shared by servers of one process (the broker's two ports) when given
        self.limiter = limiter if limiter is not None else ConnectionLimiter(
            config.serverMaxConnections, config.serverMaxConnectionsPerAddress)
        self.tls = tls if tls is not None else TlsConfig.from_environ()
        self._server: asyncio.AbstractServer | None = None
        self._accept_task: asyncio.Task | None = None
        self._sniffing: set[asyncio.Task] = set()
        self._listen: socket.socket | None = None
        self._ssl: ssl.SSLContext | None = None
        self._ssl_lock = asyncio.Lock()
        self._cert_watch: CertificateWatch | None = None
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
        except OSError as exc:
            sock.close()
            raise listen_error(exc, cfg.bindAddress, cfg.listenPort) from None
        except BaseException:
            sock.close()
            raise
        return sock

    async def start(self) -> None:
        """Bind and start accepting; ``port`` then holds the bound port."""
        loop = asyncio.get_running_loop()
        sock = self._listen_socket()
        self._port = sock.getsockname()[1]
        if self.tls.serverMode is TlsMode.DISABLED:
            self._server = await loop.create_server(self._protocol, sock=sock)
        else:
            self._listen = sock
            self._accept_task = loop.create_task(self._accept_loop(sock))
        self._start_idle_scan()
        if CertificateWatch.wanted(self.tls):
            self._cert_watch = CertificateWatch(self.name, self.tls, self.reload_ssl_context)
            await self._cert_watch.start()
        log.info("%s: listening on %s:%d (tls %s)", self.name, self.config.bindAddress,
                 self._port, self.tls.serverMode.value)

    async def _accept_loop(self, lsock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _peer = await loop.sock_accept(lsock)
            except asyncio.CancelledError:
                raise
            except OSError as e:
                log.warning("%s: accept failed: %s", self.name, e)
                await asyncio.sleep(0.01)
                continue
            task = loop.create_task(self._sniff(conn))
            self._sniffing.add(task)
            task.add_done_callback(self._sniffing.discard)

    async def _first_byte(self, conn: socket.socket) -> int | None:
        """Peek at the first byte without consuming it (None: peer closed)."""
        loop = asyncio.get_running_loop()
        readable = loop.create_future()
        fd = conn.fileno()
        loop.add_reader(fd, lambda: readable.done() or readable.set_result(None))
        try:
            await asyncio.wait_for(readable, max(self._idle_seconds, 1))
        finally:
            loop.remove_reader(fd)
        try:
            first = conn.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return await self._first_byte(conn)
        return first[0] if first else None

    async def _sniff(self, conn: socket.socket) -> None:
        """Route one accepted connection to TLS or plaintext by its first byte."""
        loop = asyncio.get_running_loop()
        conn.setblocking(False)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            first = await self._first_byte(conn)
            if first is None:
                conn.close()
                return
            if first == TLS_HANDSHAKE_BYTE:
                ctx = await self._server_ssl()
                await loop.connect_accepted_socket(self._protocol, conn, ssl=ctx,
                                                   ssl_handshake_timeout=10.0)
            elif self.tls.serverMode is TlsMode.ENFORCING:
                log.warning("%s: plaintext connection from %s refused (tls enforcing)",
                            self.name, conn.getpeername())
                conn.close()
            else:
                await loop.connect_accepted_socket(self._protocol, conn)
        except asyncio.CancelledError:
            conn.close()
            raise
        except (OSError, TimeoutError, ssl.SSLError, RuntimeError) as e:
            log.warning("%s: connection setup failed: %s", self.name, e)
            conn.close()

    async def _server_ssl(self) -> ssl.SSLContext:
        """The server's SSL context, made on the first TLS connection."""
        async with self._ssl_lock:
            if self._ssl is None:
                loop = asyncio.get_running_loop()
                self._ssl = await loop.run_in_executor(None, server_context, self.tls)
            return self._ssl

    async def reload_ssl_context(self) -> bool:
        """``loadSslContext``: build the context from the files again (off the
        loop) and use it for new connections; on failure keep the old one
        (and return False)."""
        loop = asyncio.get_running_loop()
        try:
            ctx = await loop.run_in_executor(None, server_context, self.tls)
        except (OSError, ValueError) as e:  # ssl.SSLError is an OSError
            log.error("%s: failed to create the SSL context, the previous one stays: %s",
                      self.name, e)
            return False
        async with self._ssl_lock:
            self._ssl = ctx
        log.info("%s: SSL context reloaded", self.name)
        return True

    def _channel_connected(self, channel: Channel) -> None:
        limiter = self.limiter
        if limiter.enabled:
            host = remote_host(channel.remote_addr)
            reason = limiter.admit(host)
            if reason is not None:
                limiter.log_refusal(self.name, channel.remote_addr, reason)
                channel.abort()
                return
            channel.attrs["_limited_host"] = host
        super()._channel_connected(channel)

    def _channel_closed(self, channel: Channel, exc: BaseException | None) -> None:
        host = channel.attrs.pop("_limited_host", None)
        if host is not None:
            self.limiter.release(host)
        super()._channel_closed(channel, exc)

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
        if self._accept_task is not None:
            self._accept_task.cancel()
            self._accept_task = None
            self._listen.close()
        for task in list(self._sniffing):
            task.cancel()
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace_seconds)
        for task in list(self._tasks):
            task.cancel()
        await self._stop_idle_scan()
        if self._cert_watch is not None:
            await self._cert_watch.shutdown()
            self._cert_watch = None
        for channel in list(self._channels):
            channel.close()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        await asyncio.sleep(0)
        log.info("%s: stopped", self.name)
