"""What server and client share (RocketMQ's ``NettyRemotingAbstract``).

* The processor table ``code -> (processor, admission)`` plus a default
  processor, and the generic answers of the remoting layer
  (../shared/spec/PROTOCOL.md 1.12): unknown code, REJECTREQUEST, OVERLOAD,
  SYSTEM_ERROR from a processor exception.
* Admission: Java runs each processor on a thread pool with a bounded queue;
  here each processor (or named pool of processors) has a bounded number of
  requests in flight.  A processor that returns a response directly finishes
  inside the read callback and never counts; only awaitables hold a slot.
* The response table keyed by opaque, shared by every connection of the
  service.  Timeouts come from one periodic scan of the table (Java's
  ``scanResponseTable``, here every ``SCAN_INTERVAL`` seconds while anything
  is pending) instead of a timer per request; every way out of a request
  removes its entry.
* Connection bookkeeping: the channel set, idle close, and the listener events
  brokers and name servers use for housekeeping.
* RPC hooks (``RPCHook``): run before every request a processor sees and after
  its response; a hook that raises refuses the request with SYSTEM_ERROR and
  the exception as the remark (how 4.9.8's ACL answers), the connection stays
  open.  The remoting layer knows nothing of what a hook checks.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from functools import partial
from time import perf_counter
from typing import Any, Protocol, runtime_checkable

from rmq.common.codes import ResponseCode
from rmq.common.periodic import cancel_and_wait
from rmq.remoting.channel import Channel
from rmq.remoting.command import RPC_ONEWAY, RPC_RESPONSE, RemotingCommand
from rmq.remoting.exceptions import (
    RemotingSendRequestError,
    RemotingTimeoutError,
)
from rmq.remoting.handler_table import not_supported_remark
from rmq.remoting.rpc_latency import (
    ONEWAY,
    PROCESS_REQUEST_FAILED,
    SUCCESS,
    WRITE_CHANNEL_FAILED,
    RpcLatency,
)

log = logging.getLogger("rmq.remoting")

REMARK_REJECT = "[REJECTREQUEST]system busy, start flow control for a while"
REMARK_OVERLOAD = "[OVERLOAD]system busy, start flow control for a while"

ResponseCallback = Callable[[RemotingCommand | None, BaseException | None], None]

# How often the response table is scanned for expired requests: a request
# fails between its timeout and its timeout plus this (Java: +1 s).
SCAN_INTERVAL = 0.1
# how many cancelled requests' opaques are kept to recognise their late answers
_ABANDONED_KEPT = 1024


@runtime_checkable
class Processor(Protocol):
    """A request handler (``NettyRequestProcessor``).  ``reject_request`` is optional."""

    def process_request(self, channel: Channel, request: RemotingCommand
                        ) -> RemotingCommand | None | Awaitable[RemotingCommand | None]: ...


class RPCHook(Protocol):
    """RocketMQ's ``RPCHook``: called with the peer address (``host:port``, or
    None for "a name server" on the client side) around requests."""

    def do_before_request(self, remote_addr: str | None, request: RemotingCommand) -> None: ...

    def do_after_response(self, remote_addr: str | None, request: RemotingCommand,
                          response: RemotingCommand | None) -> None: ...

    # A hook may also set ``checks_only = True``: its ``do_after_response``
    # does nothing, so a request it passed may be answered by a frame lane
    # (which makes no response object to show it).


class FrameLane(Protocol):
    """Serves recognised frames straight from a receive buffer (see ``RemotingService.lane``)."""

    def serve(self, channel: Channel, buf: memoryview, pos: int, end: int
              ) -> tuple[int, bytes | None]: ...

    def served(self) -> list[tuple[int, bool, int]]:
        """(request code, oneway, count) of what the last ``serve`` took."""
        ...


class ChannelEventListener(Protocol):
    """Connection events; every method is optional (``ChannelEventListener``)."""

    def on_channel_connect(self, remote_addr: str, channel: Channel) -> None: ...
    def on_channel_close(self, remote_addr: str, channel: Channel) -> None: ...
    def on_channel_idle(self, remote_addr: str, channel: Channel) -> None: ...
    def on_channel_exception(self, remote_addr: str, channel: Channel) -> None: ...


class Admission:
    """Bounded in-flight count of one processor or pool (Java: queue capacity)."""

    __slots__ = ("name", "limit", "in_flight")

    def __init__(self, name: str, limit: int | None) -> None:
        self.name = name
        self.limit = sys.maxsize if limit is None else limit
        self.in_flight = 0


class _Entry:
    __slots__ = ("processor", "process", "reject", "admission")

    def __init__(self, processor: Processor, admission: Admission) -> None:
        self.processor = processor
        self.process = processor.process_request
        self.reject = getattr(processor, "reject_request", None)
        self.admission = admission


def exception_remark(exc: BaseException) -> str:
    """``RemotingHelper.exceptionSimpleDesc``: the exception and where it came from
    (an exception class may name itself as Java would with ``JAVA_NAME``)."""
    text = f"{getattr(type(exc), 'JAVA_NAME', type(exc).__name__)}: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        f = frames[-1]
        text += f", {f.name}({f.filename.rsplit('/', 1)[-1]}:{f.lineno})"
    return text


class RemotingService:
    """Processor table, response table and connection events."""

    def __init__(self, name: str, listener: ChannelEventListener | None,
                 idle_seconds: int) -> None:
        self.name = name
        self._listener = listener
        self._processors: dict[int, _Entry] = {}
        self._default: _Entry | None = None
        self._pools: dict[str, Admission] = {}
        # opaque -> (future or FrameWait, channel, deadline on the loop clock, timeout)
        self._responses: dict[int, tuple[Any, Channel, float, int]] = {}
        # requests whose caller stopped waiting (a cancelled task, e.g. a client's
        # timer at shutdown): their answers may still come and are expected
        self._abandoned: dict[int, None] = {}
        self._scan_handle: asyncio.TimerHandle | None = None
        self._scan_loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Future] = set()  # in-flight responses (tasks or futures)
        self._channels: set[Channel] = set()
        self._idle_seconds = idle_seconds
        self._idle_task: asyncio.Task | None = None
        self._rpc_hooks: list[RPCHook] = []
        # rocketmq_rpc_latency, kept only while a metrics exporter is on
        self.rpc_latency: RpcLatency | None = None
        # A frame lane: ``lane.serve(channel, buf, pos, end) -> (pos, frames)``
        # serves the leading frames of a read it recognises straight from the
        # receive buffer (returning the position of the first one it leaves
        # and the response frames to write); the rest are dispatched as usual.
        # While RPC hooks are on, a lane is offered one frame at a time, and
        # only a frame the hooks passed, when every hook only checks requests
        # (``lane_after_hooks``); request timing counts what a lane answered
        # (``_lane_served``).
        self.lane: FrameLane | None = None
        self.lane_after_hooks = False
        # what paces the loop's polls (rmq.remoting.busy_poll.BusyPoll or
        # rmq.remoting.read_nap.ReadNap), when set: touched on every read with
        # the frames it held (counted up to read_nap.ENOUGH_FRAMES)
        self.pacer: Any = None

    # ---- processor table ------------------------------------------------

    def _admission(self, key: str, limit: int | None, pool: str | None) -> Admission:
        if pool is None:
            return Admission(key, limit)
        adm = self._pools.get(pool)
        if adm is None:
            adm = self._pools[pool] = Admission(pool, limit)
        elif limit is not None:
            adm.limit = limit
        return adm

    def register_processor(self, code: int, processor: Processor, limit: int | None = None,
                           pool: str | None = None) -> None:
        """Route ``code`` to ``processor``; ``limit`` bounds its requests in
        flight, shared by every code registered with the same ``pool`` name."""
        self._processors[int(code)] = _Entry(processor, self._admission(str(code), limit, pool))

    def register_default_processor(self, processor: Processor, limit: int | None = None) -> None:
        """Processor for every code without its own entry."""
        self._default = _Entry(processor, Admission("default", limit))

    # ---- RPC hooks ----------------------------------------------------------

    def register_rpc_hook(self, hook: RPCHook) -> None:
        """Run ``hook`` around every request from now on (``registerRPCHook``)."""
        if hook not in self._rpc_hooks:
            self._rpc_hooks.append(hook)
        self.lane_after_hooks = all(getattr(h, "checks_only", False) for h in self._rpc_hooks)

    def _before_hooks(self, remote_addr: str | None, request: RemotingCommand) -> None:
        for hook in self._rpc_hooks:
            hook.do_before_request(remote_addr, request)

    def _after_hooks(self, remote_addr: str | None, request: RemotingCommand,
                     response: RemotingCommand | None) -> None:
        for hook in self._rpc_hooks:
            hook.do_after_response(remote_addr, request, response)

    def _hook_refused(self, channel: Channel, cmd: RemotingCommand, exc: Exception) -> None:
        """A before-hook raised: one log line (a refusal is not a bug, and a
        flood of them must not flood the log with tracebacks) and SYSTEM_ERROR."""
        log.warning("%s: request code %d from %s refused: %s", self.name, cmd.code,
                    channel.remote_addr, exc)
        if not cmd.flag & RPC_ONEWAY:
            self._reply(channel, cmd, ResponseCode.SYSTEM_ERROR, exception_remark(exc))

    # ---- inbound ----------------------------------------------------------

    def _on_request(self, channel: Channel, cmd: RemotingCommand) -> None:
        start = 0.0 if self.rpc_latency is None else perf_counter()
        entry = self._admit(channel, cmd, start)
        if entry is not None:
            self._process(channel, cmd, entry, start)

    def _admit(self, channel: Channel, cmd: RemotingCommand, start: float) -> _Entry | None:
        """The request's processor entry once it may be processed: a known
        code (or the default processor), not rejected, under its admission
        limit, passed by the RPC hooks; else None, the refusal answered."""
        entry = self._processors.get(cmd.code, self._default)
        if entry is None:
            self._reply(channel, cmd, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                        not_supported_remark(cmd.code), start)
            return None
        reject = entry.reject
        if reject is not None and reject():
            self._reply(channel, cmd, ResponseCode.SYSTEM_BUSY, REMARK_REJECT, start)
            return None
        adm = entry.admission
        if adm.in_flight >= adm.limit:
            if not cmd.flag & RPC_ONEWAY:
                self._reply(channel, cmd, ResponseCode.SYSTEM_BUSY, REMARK_OVERLOAD, start)
            return None
        if self._rpc_hooks:
            try:
                self._before_hooks(channel.remote_addr, cmd)
            except Exception as e:  # noqa: BLE001 - a refusal (ACL) or a hook bug alike
                self._hook_refused(channel, cmd, e)
                return None
        return entry

    def _process(self, channel: Channel, cmd: RemotingCommand, entry: _Entry,
                 start: float) -> None:
        """Run an admitted request's processor and answer with its result."""
        adm = entry.admission
        try:
            result = entry.process(channel, cmd)
        except Exception as e:  # noqa: BLE001 - any processor failure becomes SYSTEM_ERROR
            self._processor_failed(channel, cmd, e, start)
            return
        if result is None:
            return
        if type(result) is RemotingCommand:
            self._finish(channel, cmd, result, start)
        elif isinstance(result, asyncio.Future):  # completed by someone else: no task needed
            adm.in_flight += 1
            self._tasks.add(result)
            result.add_done_callback(partial(self._future_done, channel, cmd, adm, start))
        elif inspect.isawaitable(result):
            adm.in_flight += 1
            task = asyncio.get_running_loop().create_task(
                self._await_result(channel, cmd, result, adm, start))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            self._processor_failed(channel, cmd, TypeError(
                f"processor returned {type(result).__name__}, not a RemotingCommand"), start)

    def dispatch(self, channel: Any, cmd: RemotingCommand) -> None:
        """Serve ``cmd`` as if it had arrived on ``channel``: same processor
        table, admission, RPC hooks and request timing, for a caller in the
        same process (the gRPC endpoint); the response is written to
        ``channel`` as usual."""
        self._on_request(channel, cmd)

    def admission_of(self, code: int) -> Admission | None:
        """The in-flight count that bounds requests of ``code`` (its processor's
        or pool's; the default processor's for a code without its own): a
        frame lane serving such requests checks and counts them as
        ``_admit`` and ``_process`` do."""
        entry = self._processors.get(code, self._default)
        return None if entry is None else entry.admission

    def hold(self, fut: asyncio.Future, adm: Admission | None) -> None:
        """A request a frame lane took whose answer comes later (``fut``):
        counted in flight against ``adm`` until it completes, and kept among
        the requests ``stop`` waits for and then cancels -- as ``_process``
        keeps a processor's awaitable."""
        if adm is not None:
            adm.in_flight += 1
        self._tasks.add(fut)

        def done(f: asyncio.Future) -> None:
            if adm is not None:
                adm.in_flight -= 1
            self._tasks.discard(f)

        fut.add_done_callback(done)

    async def _await_result(self, channel: Channel, cmd: RemotingCommand,
                            awaitable: Awaitable, adm: Admission, start: float) -> None:
        try:
            result = await awaitable
        except Exception as e:  # noqa: BLE001
            self._processor_failed(channel, cmd, e, start)
            return
        finally:
            adm.in_flight -= 1
        if result is not None:
            self._finish(channel, cmd, result, start)

    def _future_done(self, channel: Channel, cmd: RemotingCommand, adm: Admission,
                     start: float, fut: asyncio.Future) -> None:
        adm.in_flight -= 1
        self._tasks.discard(fut)
        if fut.cancelled():
            return
        exc = fut.exception()
        if exc is not None:
            self._processor_failed(channel, cmd, exc, start)
            return
        result = fut.result()
        if result is not None:
            self._finish(channel, cmd, result, start)

    def _finish(self, channel: Channel, request: RemotingCommand,
                response: RemotingCommand, start: float = 0.0) -> None:
        """Stamp the request's opaque and serialize type on the processor's
        response and write it, unless the request was oneway; ``start`` (the
        arrival, when latency is recorded) times it for rocketmq_rpc_latency."""
        if self._rpc_hooks:
            try:
                self._after_hooks(channel.remote_addr, request, response)
            except Exception:  # noqa: BLE001 - the response still goes out
                log.exception("%s: rpc hook failed after code %d", self.name, request.code)
        if request.flag & RPC_ONEWAY:
            if start:
                self.rpc_latency.record_since(start, request.code, response.code, ONEWAY)
            return
        response.opaque = request.opaque
        response.flag |= RPC_RESPONSE
        response.serialize_type = request.serialize_type
        outcome = SUCCESS
        try:
            channel.write(response)
        except RemotingSendRequestError:
            outcome = WRITE_CHANNEL_FAILED
            log.debug("%s: response to %s lost, channel closed", self.name, channel.remote_addr)
        except Exception as e:  # noqa: BLE001 - an unencodable response must not kill the loop
            log.error("%s: cannot encode response to code %d: %s", self.name, request.code, e)
            self._reply(channel, request, ResponseCode.SYSTEM_ERROR, exception_remark(e), start)
            return
        if start:
            self.rpc_latency.record_since(start, request.code, response.code, outcome)

    def _lane_served(self, served: list[tuple[int, bool, int]], start: float) -> None:
        """rocketmq_rpc_latency of the requests a frame lane answered in one
        turn: (request code, oneway, count[, response code]) each, all taken
        since ``start`` (the read's arrival), answered SUCCESS by their
        processor unless a response code says otherwise."""
        elapsed = int((perf_counter() - start) * 1000)
        for code, oneway, count, *response in served:
            self.rpc_latency.record(code, response[0] if response else 0, False,
                                    ONEWAY if oneway else SUCCESS, elapsed, count)

    def _record(self, request: RemotingCommand, response_code: int | None, outcome: int,
                start: float) -> None:
        self.rpc_latency.record_since(start, request.code, response_code, outcome)

    def _processor_failed(self, channel: Channel, cmd: RemotingCommand,
                          exc: Exception, start: float = 0.0) -> None:
        log.error("%s: process request code %d from %s failed", self.name, cmd.code,
                  channel.remote_addr, exc_info=exc)
        if not cmd.flag & RPC_ONEWAY:
            self._reply(channel, cmd, ResponseCode.SYSTEM_ERROR, exception_remark(exc))
        if start:
            self._record(cmd, None, PROCESS_REQUEST_FAILED, start)

    def _reply(self, channel: Channel, request: RemotingCommand, code: int, remark: str,
               start: float = 0.0) -> None:
        response = RemotingCommand(code, 0, 409, request.opaque, RPC_RESPONSE, remark, None, None,
                                   request.serialize_type)
        outcome = SUCCESS
        try:
            channel.write(response)
        except RemotingSendRequestError:
            outcome = WRITE_CHANNEL_FAILED
        if start:
            self._record(request, code, outcome, start)

    def _on_response(self, cmd: RemotingCommand) -> None:
        entry = self._responses.pop(cmd.opaque, None)
        if entry is None:
            if cmd.opaque in self._abandoned:
                del self._abandoned[cmd.opaque]
                log.debug("%s: response %d (code %d) to a cancelled request dropped",
                          self.name, cmd.opaque, cmd.code)
                return
            log.warning("%s: response with unknown opaque %d (code %d) dropped", self.name,
                        cmd.opaque, cmd.code)
            return
        fut = entry[0]
        if not fut.done():
            fut.set_result(cmd)

    # ---- outbound ----------------------------------------------------------

    def _send(self, channel: Channel, request: RemotingCommand, timeout_ms: int
              ) -> asyncio.Future:
        """Register ``request`` in the response table and write it; the returned
        future completes with the response or a remoting error (a timeout
        comes from the periodic scan)."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        opaque = request.opaque
        self._responses[opaque] = (fut, channel, loop.time() + timeout_ms / 1000.0, timeout_ms)
        if self._scan_handle is None or self._scan_loop is not loop:
            self._scan_loop = loop
            self._scan_handle = loop.call_later(SCAN_INTERVAL, self._scan_responses, loop)
        try:
            channel.write(request)
        except Exception as e:
            self._responses.pop(opaque, None)
            if isinstance(e, RemotingSendRequestError):
                raise
            raise RemotingSendRequestError(channel.remote_addr, e) from e
        return fut

    def send_frame(self, channel: Channel, opaque: int, frame: bytes, timeout_ms: int,
                   wait: FrameWait, more: bool = False) -> None:
        """Write a request already encoded as a whole ``frame`` (its opaque
        ``opaque``) on ``channel`` and keep ``wait`` in the response table:
        ``wait.tell(body)`` with its response's body, or ``wait.tell(None)``
        when none came within ``timeout_ms`` or the connection closed --
        once, on the loop, without a future or a ``RemotingCommand`` for the
        request.  ``more``: another frame to ``channel`` follows in this
        loop turn (``Channel.write_bytes``).  The channel's loop, kept on it,
        is the running one (``asyncio.get_running_loop()`` would make a
        getpid() system call per push)."""
        loop = channel._loop
        self._responses[opaque] = (wait, channel, loop.time() + timeout_ms / 1000.0, timeout_ms)
        if self._scan_handle is None or self._scan_loop is not loop:
            self._scan_loop = loop
            self._scan_handle = loop.call_later(SCAN_INTERVAL, self._scan_responses, loop)
        channel.write_bytes(frame, more)

    def _scan_responses(self, loop: asyncio.AbstractEventLoop) -> None:
        """Fail every request past its deadline; keep scanning while any are
        pending (one timer for the whole table instead of one per request)."""
        if loop is not self._scan_loop:  # a scan left over from an earlier loop
            return
        self._scan_handle = None
        responses = self._responses
        now = loop.time()
        expired = [op for op, entry in responses.items() if entry[2] <= now]
        for opaque in expired:
            fut, channel, _deadline, timeout_ms = responses.pop(opaque)
            if not fut.done():
                fut.set_exception(RemotingTimeoutError(channel.remote_addr, timeout_ms))
        if responses and not loop.is_closed():
            self._scan_handle = loop.call_later(SCAN_INTERVAL, self._scan_responses, loop)

    async def _invoke_channel(self, channel: Channel, request: RemotingCommand,
                              timeout_ms: int) -> RemotingCommand:
        fut = self._send(channel, request, timeout_ms)
        try:
            return await fut
        except asyncio.CancelledError:
            if self._responses.pop(request.opaque, None) is not None:
                self._abandon(request.opaque)
            raise
        finally:
            self._responses.pop(request.opaque, None)

    def _abandon(self, opaque: int) -> None:
        """Remember that nobody waits for ``opaque`` any more, so its late
        answer is dropped quietly; the oldest are forgotten past a bound."""
        abandoned = self._abandoned
        abandoned[opaque] = None
        if len(abandoned) > _ABANDONED_KEPT:
            del abandoned[next(iter(abandoned))]

    def _invoke_channel_callback(self, channel: Channel, request: RemotingCommand,
                                 timeout_ms: int, callback: ResponseCallback) -> None:
        fut = self._send(channel, request, timeout_ms)
        opaque = request.opaque
        responses = self._responses

        def done(f: asyncio.Future) -> None:
            pending = responses.pop(opaque, None)
            if f.cancelled():
                if pending is not None:
                    self._abandon(opaque)
                _call(callback, None, asyncio.CancelledError())
            elif f.exception() is not None:
                _call(callback, None, f.exception())
            else:
                _call(callback, f.result(), None)

        fut.add_done_callback(done)

    def _fail_pending(self, channel: Channel) -> None:
        """Fail at once every request still waiting for a response on ``channel``."""
        dead = [(op, e[0]) for op, e in self._responses.items() if e[1] is channel]
        for opaque, fut in dead:
            self._responses.pop(opaque, None)
            if not fut.done():
                fut.set_exception(RemotingSendRequestError(channel.remote_addr,
                                                           "connection closed"))

    # ---- connection events ----------------------------------------------------

    def _event(self, name: str, channel: Channel) -> None:
        fn = getattr(self._listener, name, None) if self._listener is not None else None
        if fn is None:
            return
        try:
            fn(channel.remote_addr, channel)
        except Exception:  # noqa: BLE001 - a listener bug must not break the connection
            log.exception("%s: listener %s failed", self.name, name)

    def _channel_connected(self, channel: Channel) -> None:
        self._channels.add(channel)
        self._event("on_channel_connect", channel)

    def _channel_closed(self, channel: Channel, exc: BaseException | None) -> None:
        if channel not in self._channels:
            return
        self._channels.discard(channel)
        self._fail_pending(channel)
        if exc is not None and not channel.attrs.get("_exception_reported"):
            self._event("on_channel_exception", channel)
        self._event("on_channel_close", channel)

    def _frame_error(self, channel: Channel, exc: Exception) -> None:
        log.warning("%s: bad frame from %s, closing: %s", self.name, channel.remote_addr, exc)
        channel.attrs["_exception_reported"] = True
        self._event("on_channel_exception", channel)
        channel.abort()

    def _start_idle_scan(self) -> None:
        if self._idle_seconds > 0 and self._idle_task is None:
            self._idle_task = asyncio.get_running_loop().create_task(self._idle_scan())

    async def _idle_scan(self) -> None:
        """Close connections with neither reads nor writes for idle_seconds
        (Netty's ``IdleStateHandler(0, 0, maxIdle)`` + close)."""
        idle = self._idle_seconds
        interval = min(1.0, max(0.05, idle / 4))
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for channel in [c for c in self._channels if now - c.last_active >= idle]:
                log.info("%s: channel %s idle for %ss, closing", self.name,
                         channel.remote_addr, idle)
                self._event("on_channel_idle", channel)
                channel.close()

    async def _stop_idle_scan(self) -> None:
        task, self._idle_task = self._idle_task, None
        await cancel_and_wait(task)


class FrameWait:
    """A request sent as a raw frame (``RemotingNode.send_frame``) in the
    response table, where a future would be: the table's readers (the
    response path, the timeout scan, a closed connection) tell it as they
    tell a future, and a frame lane that finds its answer in the receive
    buffer tells it the body straight (``tell``).  This one hands the body
    to ``callback``; a subclass may take it itself (``tell``), saving the
    callback's call on a hot path."""

    __slots__ = ("callback", "told")

    def __init__(self, callback: Callable[[Any], None]) -> None:
        self.callback = callback
        self.told = False

    def done(self) -> bool:
        return self.told

    def tell(self, body: Any) -> None:
        """The response's body (None: no answer), at once; a failure is
        logged (one request's callback must not stop the others, nor the
        connection's read)."""
        self.told = True
        try:
            self.callback(body)
        except Exception:  # noqa: BLE001
            log.exception("frame callback failed")

    def set_result(self, response: RemotingCommand) -> None:
        self.tell(response.body)

    def set_exception(self, _exc: BaseException) -> None:
        self.told = True
        asyncio.get_running_loop().call_soon(self.tell, None)


def _call(callback: ResponseCallback, response: RemotingCommand | None,
          exc: BaseException | None) -> None:
    try:
        callback(response, exc)
    except Exception:  # noqa: BLE001
        log.exception("response callback failed")
