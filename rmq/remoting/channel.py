"""One remoting connection: the asyncio protocol that frames it and the
``Channel`` handle processors and listeners see.

``RemotingProtocol`` is an ``asyncio.BufferedProtocol``: the event loop reads
straight into our receive buffer, ``buffer_updated`` cuts complete frames out
of it (``codec.frame_length``) and hands each decoded command to the owning
service (server or client) -- no StreamReader, no per-read bytes object.
The splitting loop is ``codec.decode_frames`` (compiled when built).  A
frame that is too long or does not decode closes the connection, as Netty's
``NettyDecoder`` does; other connections are unaffected.
"""

from __future__ import annotations

import asyncio
import logging
from time import monotonic, perf_counter
from typing import TYPE_CHECKING

from rmq._fast import compiled
from rmq.remoting import codec
from rmq.remoting.command import RPC_RESPONSE, RemotingCommand
from rmq.remoting.exceptions import RemotingCommandError, RemotingSendRequestError
from rmq.remoting.read_nap import ENOUGH_FRAMES, frames_ahead

if TYPE_CHECKING:
    from rmq.remoting.abstract import RemotingService

log = logging.getLogger("rmq.remoting")

# Receive buffer: a connection starts small (thousands of idle clients must
# cost little), grows to _BUSY_BUFFER once a read fills all the room it was
# offered (pipelined traffic: fewer, larger reads), beyond that only for a
# frame that needs it, and goes back to _INITIAL_BUFFER only after
# _QUIET_READS small reads in a row that leave nothing pending.  A pipelining
# client's reads come in all sizes (one request, then a burst of many): a
# buffer given back after one small read met the next burst with 4 KiB, a
# full read, a new 64 KiB buffer and a second read.
_INITIAL_BUFFER = 4 * 1024
_BUSY_BUFFER = 64 * 1024
_QUIET_READS = 64
_SMALL_READ = _INITIAL_BUFFER // 2  # a read up to this size counts toward _QUIET_READS
_MIN_FREE = 16 * 1024  # room offered to a read, at most half the buffer
# queued parts (headers, inline frames, bodies) that make Channel.write send at once
_FLUSH_PARTS = 32
_INLINE_BODY = 16 * 1024  # bodies up to this size are joined to the header (one write)

# RemotingProtocol.get_buffer and buffer_updated compiled (the twins are
# _get_buffer and _buffer_updated below): the loop calls both once a read
_c = compiled("protocol_reads")
if _c is not None:
    _c.bind(codec.decode_frames, _INITIAL_BUFFER, _BUSY_BUFFER, _QUIET_READS, _SMALL_READ,
            _MIN_FREE, ENOUGH_FRAMES)


def _addr(peer) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer) if peer else ""


def _write_bytes(self: Channel, frames: bytes, more: bool = False) -> None:
    """``Channel.write_bytes`` (twin of ``rmq._fast.protocol_reads``'s):
    write already encoded frames (a frame lane's answers to a whole read):
    at once when nothing else is queued -- they are a batch already, and
    waiting for the end of the loop's turn only adds latency -- else after
    what is queued.  ``more``: the read they answer filled all the room
    it was offered, so the loop reads the connection again in this turn
    (uvloop reads until a read comes up short); they are queued to go out
    with that read's answers in one write, at the latest at the end of
    the turn.  Dropped when the channel is gone, as a response to a
    departed peer is."""
    transport = self._transport
    if self._closed or transport.is_closing():
        return
    pending = self._pending
    if pending is None:
        if not more:
            transport.write(frames)
            self.last_active = monotonic()
            return
        pending = self._pending = []
        self._loop.call_soon(self._flush)
    pending.append(frames)
    self.last_active = monotonic()


def _flush(self: Channel) -> None:
    """``Channel._flush`` (twin of ``rmq._fast.protocol_reads``'s): what
    ``write`` and ``write_bytes`` queued in this turn of the loop, sent in
    one write."""
    pending, self._pending = self._pending, None
    if not pending or self._transport.is_closing():
        return
    if len(pending) == 1:
        self._transport.write(pending[0])
    else:
        self._transport.writelines(pending)


class Channel:
    """A connection as processors see it (Netty's ``Channel``).

    Writes made during one turn of the event loop are gathered and handed to
    the transport together at the end of the turn (one ``send`` for all the
    responses to a batch of pipelined requests), like Netty's flush
    consolidation; order is preserved.
    """

    __slots__ = ("remote_addr", "local_addr", "attrs", "last_active", "_transport", "_closed",
                 "_loop", "_pending")

    def __init__(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        self._closed = False
        self._loop = asyncio.get_running_loop()
        self._pending: list | None = None
        self.remote_addr = _addr(transport.get_extra_info("peername"))
        self.local_addr = _addr(transport.get_extra_info("sockname"))
        self.attrs: dict = {}
        self.last_active = monotonic()

    def is_active(self) -> bool:
        return not self._closed and not self._transport.is_closing()

    def write(self, cmd: RemotingCommand) -> None:
        """Encode and queue ``cmd``; RemotingSendRequestError if the channel is gone."""
        if self._closed or self._transport.is_closing():
            raise RemotingSendRequestError(self.remote_addr, "channel closed")
        head = cmd.encode_header()
        body = cmd.body
        pending = self._pending
        if pending is None:
            pending = self._pending = []
            self._loop.call_soon(self._flush)
        if not body:
            pending.append(head)
        elif type(body) is list:
            pending.append(head)
            pending.extend(body)
        elif len(body) <= _INLINE_BODY:
            pending.append(head + body)
        else:
            pending.append(head)
            pending.append(body)
        if len(pending) >= _FLUSH_PARTS:
            # a long turn of the loop (a read of many pipelined requests) starts
            # sending before it ends, so the peer works on the first responses
            # while the rest are made; the scheduled _flush sends the remainder
            self._pending = []
            self._transport.writelines(pending)
        self.last_active = monotonic()

    # (the compiled twins when built: no Python frame for a lane's answers)
    write_bytes = _write_bytes if _c is None else _c.write_bytes
    _flush = _flush if _c is None else _c.flush

    def send_response(self, response: RemotingCommand) -> None:
        """Write a response whose opaque is already the request's; a response
        for a peer that has gone away is dropped (Java logs and drops it)."""
        response.flag |= RPC_RESPONSE
        try:
            self.write(response)
        except RemotingSendRequestError:
            log.debug("response %d to closed channel %s dropped", response.opaque,
                      self.remote_addr)

    def close(self) -> None:
        """Close after writing what is queued."""
        if not self._closed:
            self._flush()
            self._closed = True
            self._transport.close()

    def abort(self) -> None:
        """Close without flushing (garbage from the peer, forced stop)."""
        self._closed = True
        self._pending = None
        self._transport.abort()

    def __repr__(self) -> str:
        return f"Channel({self.local_addr} <-> {self.remote_addr})"


def _get_buffer(self: RemotingProtocol, sizehint: int) -> memoryview:
    """``RemotingProtocol.get_buffer`` (twin of ``rmq._fast.protocol_reads``'s):
    the room after the pending bytes (a view of its own: the loop may
    release it).  With nothing pending (the last read was taken whole,
    the common case) there is nothing to move and no room to weigh."""
    end = self._end
    if self._offered < 0:
        self._resize(max(len(self._buf), _BUSY_BUFFER))  # the last read filled its room
        end = self._end
    elif end:
        size = len(self._buf)
        if size - end < min(_MIN_FREE, size // 2):
            self._make_room()
            end = self._end
    self._offered = len(self._buf) - end
    return self._view[end:]


def _buffer_updated(self: RemotingProtocol, nbytes: int) -> None:
    """``RemotingProtocol.buffer_updated`` (twin of ``rmq._fast.protocol_reads``'s):
    serve a read: the lane's turns, then the general decode of what they
    left.  The common case (the lane took the read whole) reads each field
    once and leaves at the first test that settles it."""
    full = self._full = nbytes == self._offered
    if full and len(self._buf) < _BUSY_BUFFER:
        self._offered = -1  # more is waiting: the next read gets a busy connection's room
    end = self._end = self._end + nbytes
    channel = self.channel
    if channel._closed:  # refused or aborted: nothing of it is read
        return
    channel.last_active = monotonic()
    service = self._service
    if service.pacer is not None:
        service.pacer.touch(frames_ahead(self._buf, self._start, end, ENOUGH_FRAMES))
    lane = service.lane
    if lane is not None:
        if not service._rpc_hooks:
            # the lane's turns, inline (one frame less a read): it serves
            # the runs of frames it takes, each frame between two runs
            # going the general way; on a connection it has never served,
            # a read it does not start is left to the general way whole
            # (a consumer's connection pays one lane call per read)
            view = self._view
            arrived = 0.0 if service.rpc_latency is None else perf_counter()
            start = self._start
            while True:
                pos, out = lane.serve(channel, view, start, end)
                if out is not None:
                    channel.write_bytes(out, full)
                self._start = pos
                if pos != start:
                    self._lane_used = True
                    if arrived:
                        service._lane_served(lane.served(), arrived)
                    if pos >= end:
                        break
                elif not self._lane_used or pos >= end:
                    break
                start = self._between_runs(view, pos, end, channel, service)
                if start < 0:
                    if start == -2:
                        return
                    break
        elif service.lane_after_hooks and not self._checked_turns(lane, channel, service):
            return
    pos = self._start
    if pos != end:  # (a lane took the whole read: nothing left to decode)
        frames, pos, error = codec.decode_frames(self._view, pos, end, self._max_frame)
        if not self._dispatch(frames, channel, service):
            return
        if error is not None:
            self._start = self._end = 0
            service._frame_error(channel, error)
            return
        if pos != end:
            self._start = pos
            return
    self._start = self._end = 0
    if len(self._buf) > _INITIAL_BUFFER:
        if nbytes > _SMALL_READ:
            self._small = 0
        else:
            self._small += 1
            if self._small >= _QUIET_READS:
                self._small = 0
                self._resize(_INITIAL_BUFFER)  # a quiet connection gives its room back


class RemotingProtocol(asyncio.BufferedProtocol):
    """Frames one connection and passes commands to its service."""

    __slots__ = ("_service", "_max_frame", "_buf", "_view", "_start", "_end", "_offered",
                 "channel", "_lane_used", "_full", "_small")

    def __init__(self, service: RemotingService, max_frame: int) -> None:
        self._service = service
        self._max_frame = max_frame
        self._buf = bytearray(_INITIAL_BUFFER)
        self._view = memoryview(self._buf)
        self._start = 0
        self._end = 0
        self._offered = 0  # room handed to the last read
        self.channel: Channel | None = None
        self._lane_used = False  # the service's lane has served a frame of this connection
        self._full = False  # the last read filled its room: another follows in this turn
        self._small = 0  # small reads in a row of a grown buffer (see _QUIET_READS)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.channel = Channel(transport)
        self._service._channel_connected(self.channel)

    def connection_lost(self, exc: Exception | None) -> None:
        channel = self.channel
        if channel is not None:
            channel._closed = True
            self._service._channel_closed(channel, exc)

    def eof_received(self) -> bool:
        return False

    def _make_room(self) -> None:
        """Move pending bytes to the front, or grow when a frame needs more room.

        The move is made in place: nothing outside keeps a view of the buffer
        (``decode_frames`` copies every body out), so a connection streaming
        large frames reuses one buffer instead of allocating (and zeroing) a
        new one every few frames."""
        pending = self._end - self._start
        size = len(self._buf)
        if pending + min(_MIN_FREE, size // 2) <= size // 2:
            if self._start:
                self._view[:pending] = self._view[self._start:self._end]
                self._start = 0
                self._end = pending
            return
        self._resize(size * 2)

    def _resize(self, size: int) -> None:
        """A new buffer of ``size`` bytes holding the pending bytes at its front."""
        pending = self._end - self._start
        buf = bytearray(size)
        buf[:pending] = self._view[self._start:self._end]
        self._buf = buf
        self._view = memoryview(buf)
        self._start = 0
        self._end = pending

    @staticmethod
    def _dispatch(frames: list, channel: Channel, service: RemotingService) -> bool:
        """Hand decoded frames to the service; False once the channel closed."""
        cmd_cls = RemotingCommand
        for fields in frames:
            cmd = cmd_cls(*fields)
            if cmd.flag & RPC_RESPONSE:
                service._on_response(cmd)
            else:
                service._on_request(channel, cmd)
            if channel._closed:
                return False
        return True

    def _between_runs(self, view: memoryview, pos: int, end: int, channel: Channel,
                      service: RemotingService) -> int:
        """The frame at ``pos``, between two of the lane's runs, the general
        way: where the lane's next turn starts; -1 when the general decode
        is to go on from ``pos`` (the frame is not whole or does not
        decode: it waits for or reports it), -2 once the channel closed."""
        max_frame = self._max_frame
        try:
            length = codec.frame_length(view, pos, end, max_frame)
        except RemotingCommandError:
            return -1
        if length < 0:
            return -1
        frames, next_pos, error = codec.decode_frames(view, pos, pos + 4 + length, max_frame)
        if error is not None:
            return -1
        self._start = next_pos
        return next_pos if self._dispatch(frames, channel, service) else -2

    def _checked_turns(self, lane, channel: Channel, service: RemotingService) -> bool:
        """With RPC hooks that only check requests (ACL): every whole frame is
        decoded and admitted as the general way admits it (processor, limits,
        the hooks); one that passes is offered to the lane alone, and goes to
        its processor when the lane leaves it.  A lane never sees a frame the
        hooks did not pass.  Stops at a frame not yet whole or not decodable
        (the general decode waits for or reports it); False once the channel
        closed."""
        view, end, max_frame = self._view, self._end, self._max_frame
        timed = service.rpc_latency is not None
        while self._start < end:
            pos = self._start
            try:
                length = codec.frame_length(view, pos, end, max_frame)
            except RemotingCommandError:
                return True
            if length < 0:
                return True
            frame_end = pos + 4 + length
            frames, next_pos, error = codec.decode_frames(view, pos, frame_end, max_frame)
            if error is not None or not frames:
                return True
            self._start = next_pos
            cmd = RemotingCommand(*frames[0])
            if cmd.flag & RPC_RESPONSE:
                service._on_response(cmd)
            else:
                start = perf_counter() if timed else 0.0
                entry = service._admit(channel, cmd, start)
                if entry is not None:
                    taken, out = lane.serve(channel, view, pos, frame_end)
                    if out is not None:
                        channel.write_bytes(out, self._full)
                    if taken == pos:
                        service._process(channel, cmd, entry, start)
                    elif timed:
                        service._lane_served(lane.served(), start)
            if channel._closed:
                return False
        return True

    get_buffer = _get_buffer if _c is None else _c.get_buffer
    buffer_updated = _buffer_updated if _c is None else _c.buffer_updated
