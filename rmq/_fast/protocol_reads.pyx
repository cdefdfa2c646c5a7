# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twins of ``RemotingProtocol.get_buffer`` and ``buffer_updated``
(rmq/remoting/channel.py: ``_get_buffer`` and ``_buffer_updated``, same
signatures, bound as the class's methods when built).

The event loop calls both once per read of every connection.  In Python they
are two frames and about twenty attribute reads and writes of the protocol
and its channel a read, and the lane's answer costs a third frame
(``Channel.write_bytes``).  Here the protocol's, the channel's and the
server's fields are read and set at their slots (``slots.pxd``: a load
instead of the attribute protocol), and the answer of a read that the loop
does not read again in this turn is written as ``Channel.write_bytes``
writes it when nothing is queued (the transport's ``write``, then
``last_active``), as the DLedger push writes its frames.  The rare turns (a
buffer to grow or compact, a frame between two lane runs, the general
decode, RPC hooks) call the protocol's own Python methods, as the twin
does.
"""

from time import monotonic, perf_counter

from rmq._fast.slots cimport set_slot_or_attr, slot_or_attr
from rmq._fast.store_put cimport ClassOffsets


cdef enum:
    # a protocol's fields, in ``_PROTOCOL``'s
    P_SERVICE = 0
    P_BUF = 1
    P_VIEW = 2
    P_START = 3
    P_END = 4
    P_OFFERED = 5
    P_CHANNEL = 6
    P_LANE_USED = 7
    P_FULL = 8
    P_N = 9
    # a channel's, in ``_CHANNEL``'s
    C_CLOSED = 0
    C_TRANSPORT = 1
    C_PENDING = 2
    C_ACTIVE = 3
    C_N = 4
    # a service's, in ``_SERVICE``'s
    S_LANE = 0
    S_BUSY_POLL = 1
    S_HOOKS = 2
    S_LATENCY = 3
    S_N = 4

cdef ClassOffsets _PROTOCOL = ClassOffsets(
    ("_service", "_buf", "_view", "_start", "_end", "_offered", "channel", "_lane_used", "_full"))
cdef ClassOffsets _CHANNEL = ClassOffsets(("_closed", "_transport", "_pending", "last_active"))
# (a server slots only these: the rest of its fields are in its dict)
# (the fields of its rare turns: read at their slots all the same)
cdef ClassOffsets _RARE = ClassOffsets(("_small", "_max_frame"))
cdef ClassOffsets _SERVICE = ClassOffsets(("lane", "busy_poll", "_rpc_hooks", "rpc_latency"), True)

# rmq.remoting.channel's sizes and its decode (``bind``)
cdef Py_ssize_t _initial = 0, _busy = 0, _quiet = 0, _small_read = 0, _min_free = 0
cdef object _decode_frames = None


def bind(decode_frames, Py_ssize_t initial, Py_ssize_t busy, Py_ssize_t quiet,
         Py_ssize_t small_read, Py_ssize_t min_free):
    """The receive buffer's sizes and the frame decoder of
    rmq.remoting.channel (this module sits below it)."""
    global _decode_frames, _initial, _busy, _quiet, _small_read, _min_free
    _decode_frames = decode_frames
    _initial = initial
    _busy = busy
    _quiet = quiet
    _small_read = small_read
    _min_free = min_free


def get_buffer(self, sizehint):
    """``_get_buffer``: the room after the pending bytes, a view of its own."""
    cdef Py_ssize_t p[P_N]
    cdef Py_ssize_t end, size
    if _decode_frames is None:
        raise RuntimeError("protocol_reads.bind was not called")
    _PROTOCOL.copy(self, p)
    end = slot_or_attr(self, p[P_END], "_end")
    if slot_or_attr(self, p[P_OFFERED], "_offered") < 0:
        size = len(slot_or_attr(self, p[P_BUF], "_buf"))
        self._resize(size if size > _busy else _busy)  # the last read filled its room
        end = slot_or_attr(self, p[P_END], "_end")
    elif end:
        size = len(slot_or_attr(self, p[P_BUF], "_buf"))
        if size - end < min(_min_free, size // 2):
            self._make_room()
            end = slot_or_attr(self, p[P_END], "_end")
    set_slot_or_attr(self, p[P_OFFERED], "_offered",
                     len(slot_or_attr(self, p[P_BUF], "_buf")) - end)
    return slot_or_attr(self, p[P_VIEW], "_view")[end:]


cdef int write_answer(channel, Py_ssize_t* c, out, bint more) except -1:
    """``channel.write_bytes(out, more)``: its common case (a live channel,
    nothing queued, no read to follow in this turn) here, the transport's
    ``write`` then ``last_active``; any other through the method."""
    if c[C_TRANSPORT] > 0 and c[C_CLOSED] > 0 and c[C_PENDING] > 0 and not more:
        transport = slot_or_attr(channel, c[C_TRANSPORT], "_transport")
        if slot_or_attr(channel, c[C_CLOSED], "_closed") or transport.is_closing():
            return 0  # (dropped, as the method drops it)
        if slot_or_attr(channel, c[C_PENDING], "_pending") is None:
            transport.write(out)
            set_slot_or_attr(channel, c[C_ACTIVE], "last_active", monotonic())
            return 0
    channel.write_bytes(out, more)
    return 0


def buffer_updated(self, Py_ssize_t nbytes):
    """``_buffer_updated``: serve a read (the lane's turns, then the general
    decode of what they left)."""
    cdef Py_ssize_t p[P_N]
    cdef Py_ssize_t c[C_N]
    cdef Py_ssize_t v[S_N]
    cdef Py_ssize_t r[2]
    cdef Py_ssize_t end, start, pos, small
    cdef double arrived
    cdef bint full
    _PROTOCOL.copy(self, p)
    full = nbytes == <Py_ssize_t>slot_or_attr(self, p[P_OFFERED], "_offered")
    set_slot_or_attr(self, p[P_FULL], "_full", full)
    if full and len(slot_or_attr(self, p[P_BUF], "_buf")) < _busy:
        set_slot_or_attr(self, p[P_OFFERED], "_offered", -1)  # the next read: a busy room
    end = <Py_ssize_t>slot_or_attr(self, p[P_END], "_end") + nbytes
    set_slot_or_attr(self, p[P_END], "_end", end)
    channel = slot_or_attr(self, p[P_CHANNEL], "channel")
    _CHANNEL.copy(channel, c)
    if slot_or_attr(channel, c[C_CLOSED], "_closed"):  # refused or aborted: nothing is read
        return
    set_slot_or_attr(channel, c[C_ACTIVE], "last_active", monotonic())
    service = slot_or_attr(self, p[P_SERVICE], "_service")
    _SERVICE.copy(service, v)
    busy_poll = slot_or_attr(service, v[S_BUSY_POLL], "busy_poll")
    if busy_poll is not None:
        busy_poll.touch()
    lane = slot_or_attr(service, v[S_LANE], "lane")
    if lane is not None:
        if not slot_or_attr(service, v[S_HOOKS], "_rpc_hooks"):
            # the lane's turns, inline (see the twin)
            view = slot_or_attr(self, p[P_VIEW], "_view")
            arrived = 0.0 if slot_or_attr(service, v[S_LATENCY], "rpc_latency") is None \
                else perf_counter()
            start = slot_or_attr(self, p[P_START], "_start")
            while True:
                taken, out = lane.serve(channel, view, start, end)
                if out is not None:
                    write_answer(channel, c, out, full)
                set_slot_or_attr(self, p[P_START], "_start", taken)
                pos = taken
                if pos == start and not slot_or_attr(self, p[P_LANE_USED], "_lane_used"):
                    break  # a connection it never served: the read goes the general way
                if pos != start:
                    set_slot_or_attr(self, p[P_LANE_USED], "_lane_used", True)
                    if arrived:
                        service._lane_served(lane.served(), arrived)
                if pos >= end:
                    break
                # the frame between two runs, the general way
                start = self._between_runs(view, pos, end, channel, service)
                if start == -2:
                    return  # (the channel closed)
                if start < 0:
                    break
        elif service.lane_after_hooks and not self._checked_turns(lane, channel, service):
            return
    pos = slot_or_attr(self, p[P_START], "_start")
    if pos != end:  # (a lane took the whole read: nothing left to decode)
        _RARE.copy(self, r)
        frames, pos, error = _decode_frames(slot_or_attr(self, p[P_VIEW], "_view"), pos, end,
                                            slot_or_attr(self, r[1], "_max_frame"))
        if not self._dispatch(frames, channel, service):
            return
        if error is not None:
            set_slot_or_attr(self, p[P_START], "_start", 0)
            set_slot_or_attr(self, p[P_END], "_end", 0)
            service._frame_error(channel, error)
            return
        if pos != end:
            set_slot_or_attr(self, p[P_START], "_start", pos)
            return
    set_slot_or_attr(self, p[P_START], "_start", 0)
    set_slot_or_attr(self, p[P_END], "_end", 0)
    if len(slot_or_attr(self, p[P_BUF], "_buf")) <= _initial:
        return
    # a grown buffer: the small reads in a row counted, the room given back
    # after _quiet of them (a quiet connection)
    _RARE.copy(self, r)
    small = 0 if nbytes > _small_read else <Py_ssize_t>slot_or_attr(self, r[0], "_small") + 1
    set_slot_or_attr(self, r[0], "_small", 0 if small >= _quiet else small)
    if small >= _quiet:
        self._resize(_initial)
