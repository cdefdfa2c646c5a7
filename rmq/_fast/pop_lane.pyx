# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twin of ``PopLane`` in rmq/broker/pop_lane.py: the POP_MESSAGE,
ACK_MESSAGE and BATCH_ACK_MESSAGE requests at the start of a read, served
without ``RemotingCommand`` objects or the dispatcher.

The frames are walked in C: the length prefix and the header length checked
in place, and a frame that does not start as one of the lane's requests
(``names_lane_code``: other lanes' frames cost a few byte compares) or whose
header the remoting decoder (compiled) reads as another request ends the
turn.  What lies between the header and the answer -- the processors' own
functions -- is ``PopLaneSupport``'s, shared with the twin; the answers are
encoded by the remoting encoder from the values those functions return and
written together at the end of the read.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport uint8_t
from libc.string cimport memcmp

from rmq._fast.byteorder cimport get32

cdef enum:
    SYSTEM_ERROR = 1


cdef inline bint names_lane_code(const uint8_t *f, Py_ssize_t n) noexcept nogil:
    """``rmq.broker.pop_lane.names_lane_code`` of the frame ``f[:n]``: a JSON
    header starting ``{"code":`` with 200050, 200051 or 200151."""
    if n < 19 or f[0] != 0 or memcmp(f + 4, b'{"code":200', 11) != 0:
        return False
    if 48 <= f[18] <= 57:
        return False
    return ((f[15] == 48 and f[16] == 53 and f[17] == 48)          # 050
            or (f[15] == 48 and f[16] == 53 and f[17] == 49)       # 051
            or (f[15] == 49 and f[16] == 53 and f[17] == 49))      # 151


cdef class PopLane:
    """See ``rmq.broker.pop_lane.PopLane`` (the twin) for the contract."""

    cdef readonly object support
    cdef readonly Py_ssize_t max_frame
    cdef object _take, _frame, _failed, _later, _read
    cdef dict _counts

    def __init__(self, support, Py_ssize_t max_frame):
        self.support = support
        self.max_frame = max_frame
        self._take = support.take
        self._frame = support.frame
        self._failed = support.failed_frame
        self._later = support.later
        self._read = support.read
        self._counts = {}

    def served(self):
        """(request code, oneway, count, response code) of what the last
        ``serve`` took (a request answered later counted as SUCCESS)."""
        return [(k[0], False, n, k[1]) for k, n in self._counts.items()]

    def serve(self, channel, buf, Py_ssize_t pos, Py_ssize_t end):
        """Serve the lane's requests at the start of ``buf[pos:end]``; returns
        the position of the first frame left to the general path and the
        answers to write (None when there are none)."""
        cdef Py_buffer pb
        cdef const uint8_t *p
        cdef Py_ssize_t length, hlen
        cdef int code, response
        cdef list out = []
        cdef dict counts = {}
        self._counts = counts
        view = memoryview(buf)
        PyObject_GetBuffer(buf, &pb, PyBUF_SIMPLE)
        try:
            p = <const uint8_t *>pb.buf
            if end > pb.len:
                end = pb.len
            while pos >= 0 and end - pos >= 8:
                length = get32(p + pos)
                if length < 4 or length > self.max_frame or end - pos - 4 < length:
                    break
                if not names_lane_code(p + pos + 4, length):
                    break  # not one of the lane's requests: no decode
                hlen = ((<Py_ssize_t>p[pos + 5] << 16) | (<Py_ssize_t>p[pos + 6] << 8)
                        | p[pos + 7])
                if hlen + 4 > length:
                    break
                got = self._read(view[pos + 4:pos + 4 + length])
                if got is None:
                    break
                code, opaque, stype, ext, body = <tuple>got
                try:
                    answer = self._take(channel, code, ext, body)
                except Exception as exc:  # answered as the general path would
                    out.append(self._failed(channel, code, opaque, stype, exc))
                    response = SYSTEM_ERROR
                else:
                    if answer is None:
                        break
                    if type(answer) is tuple:
                        out.append(self._frame(answer, opaque, stype))
                        response = (<tuple>answer)[0]
                    else:
                        self._later(channel, answer, code, opaque, stype)
                        response = 0
                key = (code, response)
                counts[key] = counts.get(key, 0) + 1
                pos += 4 + length
        finally:
            PyBuffer_Release(&pb)
        return pos, (b"".join(out) if out else None)
