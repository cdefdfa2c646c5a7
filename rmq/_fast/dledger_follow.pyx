# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""A DLedger follower's pushes answered from the receive buffer: the
compiled twins of ``py_push_at`` and ``PyPushLane`` in rmq/dledger/server.py.

``push_at`` takes only a whole PUSH request frame whose JSON header has
exactly the form leaders write -- ``{"code":51004,"flag":0,"language":
"JAVA","opaque":N,"serializeTypeCurrentRPC":"JSON","version":V}``, integers
in JSON's form within int32, not -0 --; anything else is left to the general
decoder, which reads or refuses it as before.  ``PushLane`` is the frame
lane of a member's server: each such push's body is read where it lies
(``decode_push``) and handed to the processor's ``_append_rows``; the
answer it makes goes out in the frame the general way writes for it.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from libc.stdint cimport int64_t, uint8_t

from rmq._fast.dledger_wire cimport json_frame
from rmq._fast.json_text cimport json_int32, json_step

import logging

from rmq._fast.dledger_frames import push_frame
from rmq._fast.dledger_push import decode_push

log = logging.getLogger("rmq.dledger")

cdef enum:
    PUSH = 51004    # RequestCode.PUSH
    SUCCESS = 200   # Code.SUCCESS
    HEAD_LEN = 50   # the header up to the opaque (rpc.PUSH_HEAD)


cdef bint c_push_at(const uint8_t* base, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t max_frame,
                    int64_t* opaque, Py_ssize_t* body, Py_ssize_t* frame_end) noexcept nogil:
    """``push_at`` on a buffer's bytes: True with the opaque, body start and
    frame end when the whole frame at ``pos`` is a plain PUSH request."""
    cdef const uint8_t* p
    cdef const uint8_t* hend
    cdef int64_t version
    if not json_frame(base, pos, end, max_frame, &p, &hend, frame_end):
        return False
    if not (json_step(&p, hend, '{"code":51004,"flag":0,"language":"JAVA","opaque":', HEAD_LEN)
            and json_int32(&p, hend, opaque)
            and json_step(&p, hend, ',"serializeTypeCurrentRPC":"JSON","version":', 44)
            and json_int32(&p, hend, &version) and json_step(&p, hend, '}', 1)) or p != hend:
        return False
    body[0] = hend - base
    return True


def push_at(buf, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t max_frame):
    """(opaque, body start, frame end) of the whole plain PUSH request frame
    at ``pos`` in ``buf[:end]``; None for anything else (not whole, another
    request, another form)."""
    cdef Py_buffer pb
    cdef int64_t opaque
    cdef Py_ssize_t body, frame_end
    PyObject_GetBuffer(buf, &pb, PyBUF_SIMPLE)
    try:
        if end > pb.len or not c_push_at(<const uint8_t*>pb.buf, pos, end, max_frame, &opaque,
                                         &body, &frame_end):
            return None
        return opaque, body, frame_end
    finally:
        PyBuffer_Release(&pb)


cdef class PushLane:
    """The frame lane of a DLedger member's server: the leading plain PUSH
    frames of a read that ``append_rows`` (``_Processor._append_rows``)
    takes, each answered in the frame of ``answer_head``, its opaque,
    ``answer_tail`` and the answer (as the general way writes it); the
    first other frame, and what follows it, goes the general way, as does
    a push whose ``append_rows`` raised (logged)."""

    cdef object append_rows
    cdef Py_ssize_t max_frame
    cdef bytes answer_head, answer_tail
    cdef Py_ssize_t count  # the pushes the last ``serve`` answered

    def __init__(self, append_rows, Py_ssize_t max_frame, bytes answer_head not None,
                 bytes answer_tail not None):
        self.append_rows = append_rows
        self.max_frame = max_frame
        self.answer_head = answer_head
        self.answer_tail = answer_tail
        self.count = 0

    def serve(self, channel, buf, Py_ssize_t pos, Py_ssize_t end):
        cdef Py_buffer pb
        cdef int64_t opaque
        cdef Py_ssize_t body, frame_end, n = 0
        out = None
        PyObject_GetBuffer(buf, &pb, PyBUF_SIMPLE)
        try:
            if end > pb.len:
                end = pos
            while pos < end:
                if not c_push_at(<const uint8_t*>pb.buf, pos, end, self.max_frame, &opaque,
                                 &body, &frame_end):
                    break
                fields = decode_push(buf[body:frame_end])
                if fields is None:
                    break
                try:
                    answer = self.append_rows(fields)
                except Exception:  # the general way takes the push and answers it
                    log.exception("push lane: a push from %s failed", fields[3])
                    break
                if answer is None:
                    break
                frame = push_frame(self.answer_head, opaque, self.answer_tail, answer)
                out = frame if out is None else out + frame
                pos = frame_end
                n += 1
        finally:
            PyBuffer_Release(&pb)
            self.count = n
        return pos, out

    def served(self):
        """(code, oneway, count, response code) of what the last ``serve`` answered."""
        return [(PUSH, False, self.count, SUCCESS)]
