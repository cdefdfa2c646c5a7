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

Also the compiled twins of ``Channel.write_bytes`` and ``Channel._flush``
(``_write_bytes`` and ``_flush`` there, bound as the class's methods when
built), and ``write_frames``, their C entry for compiled callers (a DLedger
lane's answers once a quorum holds them): frames written or queued, and the
queue sent at the end of the loop's turn, with no Python frame.
"""

from time import monotonic, perf_counter

from cpython.bytearray cimport PyByteArray_AS_STRING

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
    C_LOOP = 4
    C_N = 5
    # a service's, in ``_SERVICE``'s
    S_LANE = 0
    S_PACER = 1
    S_HOOKS = 2
    S_LATENCY = 3
    S_N = 4

cdef ClassOffsets _PROTOCOL = ClassOffsets(
    ("_service", "_buf", "_view", "_start", "_end", "_offered", "channel", "_lane_used", "_full"))
cdef ClassOffsets _CHANNEL = ClassOffsets(("_closed", "_transport", "_pending", "last_active",
                                           "_loop"))
# (a server slots only these: the rest of its fields are in its dict)
# (the fields of its rare turns: read at their slots all the same)
cdef ClassOffsets _RARE = ClassOffsets(("_small", "_max_frame"))
cdef ClassOffsets _SERVICE = ClassOffsets(("lane", "pacer", "_rpc_hooks", "rpc_latency"), True)

# rmq.remoting.channel's sizes and its decode (``bind``)
cdef Py_ssize_t _initial = 0, _busy = 0, _quiet = 0, _small_read = 0, _min_free = 0
cdef Py_ssize_t _frames_counted = 0
cdef object _decode_frames = None


def bind(decode_frames, Py_ssize_t initial, Py_ssize_t busy, Py_ssize_t quiet,
         Py_ssize_t small_read, Py_ssize_t min_free, Py_ssize_t frames_counted):
    """The receive buffer's sizes, the frames a pacer is told of at most
    and the frame decoder of rmq.remoting.channel (this module sits below
    it)."""
    global _decode_frames, _initial, _busy, _quiet, _small_read, _min_free, _frames_counted
    _frames_counted = frames_counted
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
    """``channel.write_bytes(out, more)``: for a channel whose fields are
    slots (``c``, their offsets: a ``Channel``), its steps here
    (``write_through``); any other through its method."""
    cdef int i
    for i in range(C_N):
        if c[i] <= 0:
            channel.write_bytes(out, more)
            return 0
    return write_through(channel, c, out, more)


cdef int write_through(channel, Py_ssize_t* c, out, bint more) except -1:
    """``Channel.write_bytes``'s steps (its twin ``_write_bytes``), the
    channel's fields at their slots (``c``) or through its attributes:
    dropped for a channel gone; written at once when nothing is queued and
    no read follows in this turn; else queued, the queue sent by ``_flush``
    at the end of the turn."""
    transport = slot_or_attr(channel, c[C_TRANSPORT], "_transport")
    if slot_or_attr(channel, c[C_CLOSED], "_closed") or transport.is_closing():
        return 0  # (dropped, as a response to a departed peer is)
    pending = slot_or_attr(channel, c[C_PENDING], "_pending")
    if pending is None:
        if not more:
            transport.write(out)
            set_slot_or_attr(channel, c[C_ACTIVE], "last_active", monotonic())
            return 0
        pending = []
        set_slot_or_attr(channel, c[C_PENDING], "_pending", pending)
        slot_or_attr(channel, c[C_LOOP], "_loop").call_soon(channel._flush)
    pending.append(out)
    set_slot_or_attr(channel, c[C_ACTIVE], "last_active", monotonic())
    return 0


cdef int write_frames(channel, out, bint more) except -1:
    """``channel.write_bytes(out, more)`` for compiled callers: a
    ``Channel``'s steps here, any other channel through its method."""
    cdef Py_ssize_t c[C_N]
    _CHANNEL.copy(channel, c)
    return write_answer(channel, c, out, more)


def write_bytes(self, frames, bint more=False):
    """``Channel.write_bytes`` (its twin ``_write_bytes``): write already
    encoded frames, at once or queued (see ``write_through``)."""
    cdef Py_ssize_t c[C_N]
    _CHANNEL.copy(self, c)
    write_through(self, c, frames, more)


def flush(self):
    """``Channel._flush`` (its twin ``_flush``): what is queued sent in one
    write (unless the transport is closing)."""
    cdef Py_ssize_t c[C_N]
    _CHANNEL.copy(self, c)
    pending = slot_or_attr(self, c[C_PENDING], "_pending")
    set_slot_or_attr(self, c[C_PENDING], "_pending", None)
    transport = slot_or_attr(self, c[C_TRANSPORT], "_transport")
    if not pending or transport.is_closing():
        return
    if len(pending) == 1:
        transport.write(pending[0])
    else:
        transport.writelines(pending)


cdef inline Py_ssize_t frames_ahead(object buf, Py_ssize_t start, Py_ssize_t end,
                                    Py_ssize_t cap):
    """``read_nap.frames_ahead``: the frames pending in ``buf`` (a
    bytearray) from ``start`` to ``end``, the last one's part counted whole,
    at most ``cap``."""
    cdef const unsigned char* d = <const unsigned char*>PyByteArray_AS_STRING(buf)
    cdef Py_ssize_t count = 0
    while start < end and count < cap:
        count += 1
        if end - start < 4:
            break
        start += 4 + ((<Py_ssize_t>d[start] << 24) | (<Py_ssize_t>d[start + 1] << 16)
                      | (<Py_ssize_t>d[start + 2] << 8) | d[start + 3])
    return count


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
    pacer = slot_or_attr(service, v[S_PACER], "pacer")
    if pacer is not None:
        pacer.touch(frames_ahead(slot_or_attr(self, p[P_BUF], "_buf"),
                                 slot_or_attr(self, p[P_START], "_start"), end, _frames_counted))
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
