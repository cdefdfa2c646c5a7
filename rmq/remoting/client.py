"""RemotingClient: outgoing connections (RocketMQ's ``NettyRemotingClient``).

One connection per address, created on first use with ``connectTimeoutMillis``
and re-created after it closes.  ``addr=None`` means "a name server": the
client sticks to the chosen one while its connection is healthy and moves on
to the next address of the list when it fails (connect error inside the same
call; send error or timeout close the connection so the next call rotates).
Requests the server sends on these connections go to the processors
registered here.  ``NettyClientConfig.useTLS`` (``tls.enable``) turns on TLS.
Registered RPC hooks (e.g. the ACL signer) see every request before it is
written and, for ``invoke``, its response.
"""

from __future__ import annotations

import asyncio
import logging
import random
import ssl
import time

from rmq.remoting.abstract import ChannelEventListener, Processor, RemotingService, ResponseCallback
from rmq.remoting.channel import Channel, RemotingProtocol
from rmq.remoting.command import RemotingCommand
from rmq.remoting.config import NettyClientConfig
from rmq.remoting.exceptions import (
    RemotingConnectError,
    RemotingError,
    RemotingSendRequestError,
    RemotingTimeoutError,
)
from rmq.remoting.tls import TlsConfig, client_context

log = logging.getLogger("rmq.remoting")

# Receive buffer of a client connection: pull responses are 32 KiB and more
# (32 x 1 KiB records); room for several lets one read take what the socket
# holds, and the room for the next ones is made in place (see _make_room).
_CLIENT_BUFFER = 512 * 1024


def _split_addr(addr: str) -> tuple[str, int]:
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise RemotingConnectError(addr, "address is not host:port")
    return host.strip("[]"), int(port)


class ClientProtocol(RemotingProtocol):
    """``RemotingProtocol`` with the receive buffer of a client connection."""

    __slots__ = ()

    def __init__(self, service: RemotingService, max_frame: int) -> None:
        super().__init__(service, max_frame)
        self._buf = bytearray(_CLIENT_BUFFER)
        self._view = memoryview(self._buf)

    def _make_room(self) -> None:
        """Move the incomplete frame's bytes to the front of the same buffer
        when they fit in the half already consumed: no allocation, and the
        buffer's pages stay mapped (a fresh 512 KiB buffer per move costs
        page faults); otherwise the general move (which may grow it)."""
        start, end = self._start, self._end
        pending = end - start
        if pending <= start and pending + _CLIENT_BUFFER // 4 <= len(self._buf):
            self._view[:pending] = self._view[start:end]
            self._start, self._end = 0, pending
        else:
            super()._make_room()


class RemotingClient(RemotingService):
    """Connections to name servers and brokers."""

    def __init__(self, config: NettyClientConfig | None = None,
                 listener: ChannelEventListener | None = None,
                 tls: TlsConfig | None = None) -> None:
        self.config = config if config is not None else NettyClientConfig()
        self.tls = tls if tls is not None else TlsConfig.from_environ()
        self._ssl: ssl.SSLContext | None = None
        super().__init__("remoting-client", listener, self.config.clientChannelMaxIdleTimeSeconds)
        self._table: dict[str, Channel] = {}
        self._connecting: dict[str, asyncio.Future] = {}
        self._namesrv: list[str] = []
        self._namesrv_chosen: str | None = None
        self._namesrv_index = random.randrange(1000)
        self._closed = False

    # ---- name servers ---------------------------------------------------------

    def update_namesrv_address_list(self, addrs: list[str]) -> None:
        addrs = [a.strip() for a in addrs if a and a.strip()]
        if addrs != self._namesrv:
            self._namesrv = addrs
            if self._namesrv_chosen not in addrs:
                self._namesrv_chosen = None

    def get_namesrv_address_list(self) -> list[str]:
        return list(self._namesrv)

    async def _namesrv_channel(self) -> Channel:
        chosen = self._namesrv_chosen
        if chosen is not None:
            ch = self._table.get(chosen)
            if ch is not None and ch.is_active():
                return ch
        if not self._namesrv:
            raise RemotingConnectError("<no name server>", "name server address list is empty")
        last: BaseException | None = None
        for _ in range(len(self._namesrv)):
            self._namesrv_index += 1
            addr = self._namesrv[self._namesrv_index % len(self._namesrv)]
            try:
                ch = await self._channel(addr)
            except RemotingConnectError as e:
                last = e
                continue
            self._namesrv_chosen = addr
            return ch
        if len(self._namesrv) == 1 and last is not None:
            raise last  # already names the address; wrapping it would say it twice
        raise RemotingConnectError(",".join(self._namesrv), last)

    # ---- connections --------------------------------------------------------------

    def _protocol(self) -> RemotingProtocol:
        return ClientProtocol(self, self.config.frameMaxLength)

    async def _channel(self, addr: str) -> Channel:
        ch = self._table.get(addr)
        if ch is not None and ch.is_active():
            return ch
        if self._closed:
            raise RemotingConnectError(addr, "client closed")
        pending = self._connecting.get(addr)
        if pending is None:
            pending = asyncio.get_running_loop().create_task(self._connect(addr))
            self._connecting[addr] = pending
            pending.add_done_callback(lambda _t: self._connecting.pop(addr, None))
        return await asyncio.shield(pending)

    async def _connect(self, addr: str) -> Channel:
        host, port = _split_addr(addr)
        loop = asyncio.get_running_loop()
        timeout = self.config.connectTimeoutMillis / 1000.0
        try:
            _transport, protocol = await asyncio.wait_for(
                loop.create_connection(self._protocol, host, port, **self._connect_kwargs()),
                timeout)
        except OSError as e:  # includes TimeoutError
            raise RemotingConnectError(addr, str(e) or "connect timeout") from None
        ch = protocol.channel
        self._table[addr] = ch
        self._start_idle_scan()
        return ch

    def _connect_kwargs(self) -> dict:
        """TLS when ``useTLS`` is set (``tls.enable``); no host name check, as Java."""
        if not self.config.useTLS:
            return {}
        if self._ssl is None:
            self._ssl = client_context(self.tls)
        return {"ssl": self._ssl, "server_hostname": ""}

    def _channel_closed(self, channel: Channel, exc: BaseException | None) -> None:
        for addr, ch in list(self._table.items()):
            if ch is channel:
                del self._table[addr]
        super()._channel_closed(channel, exc)

    def _close_addr(self, addr: str) -> None:
        ch = self._table.pop(addr, None)
        if ch is not None:
            ch.close()
        if addr == self._namesrv_chosen:
            self._namesrv_chosen = None

    async def _resolve(self, addr: str | None) -> tuple[str, Channel]:
        if addr is None:
            ch = await self._namesrv_channel()
            return self._namesrv_chosen or ch.remote_addr, ch
        return addr, await self._channel(addr)

    # ---- invocations ----------------------------------------------------------------

    def register_processor(self, code: int, processor: Processor, limit: int | None = None,
                           pool: str | None = None) -> None:
        """Handle requests the server sends to this client (e.g. NOTIFY_CONSUMER_IDS_CHANGED)."""
        super().register_processor(code, processor, limit, pool)

    async def invoke(self, addr: str | None, request: RemotingCommand,
                     timeout_ms: int = 3000) -> RemotingCommand:
        """Send ``request`` and wait for the response (``invokeSync``)."""
        if self._rpc_hooks:
            self._before_hooks(addr, request)
            response = await self._invoke(addr, request, timeout_ms)
            self._after_hooks(addr, request, response)
            return response
        return await self._invoke(addr, request, timeout_ms)

    async def _invoke(self, addr: str | None, request: RemotingCommand,
                      timeout_ms: int) -> RemotingCommand:
        ch = self._table.get(addr) if addr is not None else None
        if ch is not None and ch.is_active():  # the common case: no connect, no awaits
            target, left = addr, timeout_ms
        else:
            begin = time.monotonic()
            target, ch = await self._resolve(addr)
            left = timeout_ms - int((time.monotonic() - begin) * 1000)
            if left <= 0:
                raise RemotingTimeoutError(target, timeout_ms)
        try:
            return await self._invoke_channel(ch, request, left)
        except RemotingTimeoutError:
            if self.config.clientCloseSocketIfTimeout:
                self._close_addr(target)
            raise
        except RemotingSendRequestError:
            self._close_addr(target)
            raise

    async def invoke_oneway(self, addr: str | None, request: RemotingCommand,
                            timeout_ms: int = 3000) -> None:
        """Send without waiting for (or receiving) a response."""
        if self._rpc_hooks:
            self._before_hooks(addr, request)
        target, ch = await self._resolve(addr)
        request.mark_oneway()
        try:
            ch.write(request)
        except RemotingSendRequestError:
            self._close_addr(target)
            raise

    def invoke_callback(self, addr: str | None, request: RemotingCommand, timeout_ms: int,
                        callback: ResponseCallback) -> None:
        """Send without awaiting; ``callback(response, None)`` or
        ``callback(None, error)`` runs exactly once on the loop."""
        if self._rpc_hooks:
            self._before_hooks(addr, request)
        ch = self._table.get(addr) if addr is not None else None
        if ch is not None and ch.is_active():
            try:
                self._invoke_channel_callback(ch, request, timeout_ms, callback)
            except RemotingError as e:
                asyncio.get_running_loop().call_soon(callback, None, e)
            return
        task = asyncio.get_running_loop().create_task(
            self._callback_after_connect(addr, request, timeout_ms, callback))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _callback_after_connect(self, addr: str | None, request: RemotingCommand,
                                      timeout_ms: int, callback: ResponseCallback) -> None:
        try:
            _target, ch = await self._resolve(addr)
            self._invoke_channel_callback(ch, request, timeout_ms, callback)
        except RemotingError as e:
            callback(None, e)

    async def close(self) -> None:
        """Close every connection; pending requests fail with RemotingSendRequestError."""
        self._closed = True
        await self._stop_idle_scan()
        for task in list(self._connecting.values()):
            task.cancel()
        for ch in list(self._table.values()):
            ch.close()
        for ch in list(self._channels):
            ch.close()
        self._table.clear()
        await asyncio.sleep(0)
