"""The broker's processors called in process, with no socket.

A gRPC client is seen by the processors as a ``LocalChannel``: a channel with
the client's address whose writes never reach a transport.  A response
written to it completes the future of the request it answers (matched by
opaque); a request the broker sends to the client over it (a transaction
check, a consumer-ids change) goes to ``on_request``, which the client's
session turns into a Telemetry command.  Requests run through
``RemotingServer.dispatch``: the same processor table, request queues,
ACL hook and ``rocketmq_rpc_latency`` timing as remoting requests; under ACL each request
is signed with the client's account (``rmq.proxy.auth``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from rmq.common.codes import LanguageCode, ResponseCode
from rmq.proxy.auth import refusal, sign
from rmq.remoting.command import RPC_RESPONSE, RemotingCommand
from rmq.remoting.exceptions import RemotingSendRequestError, RemotingTimeoutError

# LocalChannel.attrs key: the (access key, secret key) requests are signed with
CREDENTIALS = "credentials"


class LocalChannel:
    """A channel to a gRPC client, as processors and client managers see it."""

    __slots__ = ("remote_addr", "local_addr", "attrs", "last_active", "on_request", "_waiting",
                 "_closed")

    def __init__(self, remote_addr: str, local_addr: str,
                 on_request: Callable[[RemotingCommand], None] | None = None) -> None:
        self.remote_addr = remote_addr
        self.local_addr = local_addr
        self.attrs: dict = {}
        self.last_active = time.monotonic()
        self.on_request = on_request
        self._waiting: dict[int, asyncio.Future] = {}
        self._closed = False

    def is_active(self) -> bool:
        return not self._closed

    def expect(self, opaque: int) -> asyncio.Future:
        """A future completed by the response with ``opaque``."""
        fut = asyncio.get_running_loop().create_future()
        self._waiting[opaque] = fut
        return fut

    def forget(self, opaque: int) -> None:
        self._waiting.pop(opaque, None)

    def write(self, cmd: RemotingCommand) -> None:
        if self._closed:
            raise RemotingSendRequestError(self.remote_addr, "channel closed")
        self.last_active = time.monotonic()
        if cmd.flag & RPC_RESPONSE:
            if type(cmd.body) is list:  # parts a socket write would gather (zero copy)
                cmd.body = b"".join(cmd.body)
            fut = self._waiting.pop(cmd.opaque, None)
            if fut is not None and not fut.done():
                fut.set_result(cmd)
        elif self.on_request is not None:
            self.on_request(cmd)

    def write_bytes(self, frames: bytes) -> None:
        """Frame lanes never serve a local channel (it has no receive buffer)."""
        raise RemotingSendRequestError(self.remote_addr, "no transport for encoded frames")

    def send_response(self, response: RemotingCommand) -> None:
        response.flag |= RPC_RESPONSE
        try:
            self.write(response)
        except RemotingSendRequestError:
            pass

    def close(self) -> None:
        self._closed = True
        waiting, self._waiting = self._waiting, {}
        for fut in waiting.values():
            if not fut.done():
                fut.set_exception(RemotingSendRequestError(self.remote_addr, "channel closed"))

    abort = close

    def __repr__(self) -> str:
        return f"LocalChannel({self.local_addr} <-> {self.remote_addr})"


def _expire(fut: asyncio.Future) -> None:
    """The request's time is up: its future ends with no response."""
    if not fut.done():
        fut.set_result(None)


class LocalInvoker:
    """Runs requests through a remoting server's processor table."""

    def __init__(self, server: Any) -> None:
        self.server = server

    async def invoke(self, channel: LocalChannel, code: int, ext: dict[str, str],
                     body: bytes | None = None, timeout_s: float = 3.0,
                     language: int = LanguageCode.JAVA) -> RemotingCommand:
        """The processor's response to request ``code``; RemotingTimeoutError
        when none comes within ``timeout_s``."""
        request = self._request(channel, code, ext, body)
        request.language = language
        fut = channel.expect(request.opaque)
        self.server.dispatch(channel, request)
        if not fut.done():  # most processors answer within dispatch: no timer, no task
            timer = asyncio.get_running_loop().call_later(timeout_s, _expire, fut)
            try:
                await fut
            finally:
                timer.cancel()
                channel.forget(request.opaque)
        else:
            channel.forget(request.opaque)
        response = fut.result()
        if response is None:
            raise RemotingTimeoutError(channel.remote_addr, int(timeout_s * 1000))
        if response.code == ResponseCode.SYSTEM_ERROR:
            refused = refusal(response.remark)
            if refused is not None:
                raise refused
        return response

    @staticmethod
    def _request(channel: LocalChannel, code: int, ext: dict[str, str],
                 body: bytes | None) -> RemotingCommand:
        """The request, signed with the client's ACL account when it has one."""
        request = RemotingCommand.create_request(code, None, body)
        fields = {k: v for k, v in ext.items() if v is not None}
        credentials = channel.attrs.get(CREDENTIALS)
        if credentials is not None:
            sign(fields, body, credentials)
        request.ext_fields = fields
        return request

    def invoke_oneway(self, channel: LocalChannel, code: int, ext: dict[str, str],
                      body: bytes | None = None) -> None:
        request = self._request(channel, code, ext, body)
        request.mark_oneway()
        self.server.dispatch(channel, request)
