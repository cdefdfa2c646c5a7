"""The pop lane: POP_MESSAGE that finds messages, ACK_MESSAGE and
BATCH_ACK_MESSAGE served straight from a connection's receive buffer.

A POP consumer's connection carries pops and the acks of what they answered.
The general path turns each request into a ``RemotingCommand``, runs it
through the dispatcher, the request queue and the processor's coroutine, and
encodes a response command.  The lane reads each frame with the remoting
decoder (compiled when built), hands the header's values (or the batch ack's
body) to the processors' own functions -- ``pop.lane_pop`` (``read_pop``
and ``pop_answer_now``), ``AckMessageProcessor.ack_answer``,
``ack.batch_ack_now``: the checks, checkpoint and ack records, offsets,
statistics are theirs; the compiled ``lane_pop`` and ``batch_ack_now`` serve
the usual request in one call and hand anything else to their twins -- and
writes the answer from the values those functions return (``frame``), the
answers of one read together.  A request answered later counts against its
pool's in-flight bound on the lane's server and is held there, so ``stop``
waits for it and then cancels it, as for the general path's.  The bytes are
the general path's: the twin ``frame`` uses the same encoder on the same
values; the compiled one writes a found pop's header and a plain ack
answer's from pieces cut from that encoder's text, the records in the same
allocation, and leaves anything else to the twin.

The lane takes only what it serves exactly as the general path would: a
request frame of one of its codes (no oneway) whose request queue would run it
at once; of the pops, one the processor's checks pass, of a group that is not
orderly, with a TAG filter (no SQL92), and, when it would wait for messages
(a pollTime), that may find some (``may_find``, read without changing
anything) -- a refusal, an orderly pop and a pop that would wait (long
polling) go the general way whole; a pop without a pollTime that finds
nothing is answered here as there, at once.  A taken request whose
coroutine suspends (a revive record waiting for the group commit, a pop
whose messages were all filtered out waiting for more) is answered when it
completes.  The first frame the lane does not take
ends its turn; that frame goes the general way, then the lane tries again.

``PopLane`` here is the pure-Python twin of ``rmq._fast.pop_lane.PopLane``
(same constructor, same ``serve``); both share ``PopLaneSupport``.
``make_pop_lane`` picks the compiled one when built.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from rmq._fast import compiled
from rmq.broker.fast_failure import RequestQueue
from rmq.broker.processor.ack import batch_ack_now
from rmq.broker.processor.pop import PopResult, answer_ext, lane_pop
from rmq.common.codes import CURRENT_VERSION, RequestCode, ResponseCode
from rmq.common.eager import run_eagerly
from rmq.remoting import codec
from rmq.remoting.abstract import exception_remark
from rmq.remoting.command import RPC_ONEWAY, RPC_RESPONSE
from rmq.remoting.exceptions import RemotingCommandError

log = logging.getLogger("rmq.broker")

POP = int(RequestCode.POP_MESSAGE)
ACK = int(RequestCode.ACK_MESSAGE)
BATCH_ACK = int(RequestCode.BATCH_ACK_MESSAGE)
SYSTEM_ERROR = int(ResponseCode.SYSTEM_ERROR)


def answer_frame(code: int, remark: str | None, ext: dict[str, str] | None, body: Any,
                 size: int, opaque: int, stype: int) -> bytes:
    """The response frame the general path writes for a processor's
    ``response(code, remark, ext, body)`` to a request of ``opaque`` and
    serialization ``stype``: prefix, header and the body's ``size`` bytes."""
    head = codec.encode(code, 0, CURRENT_VERSION, opaque, RPC_RESPONSE, remark, ext or None,
                        stype, size if body else 0)
    return b"".join([head, *body]) if body else head


def frame(answer: tuple, opaque: int, stype: int) -> bytes:
    """The response frame of a ``PopLaneSupport.take`` answer: ``(code,
    remark)`` of an ack, ``(code, remark, ext, body, size)`` of a pop (ext a
    ``PopResult`` when it found messages).  The twin of
    ``rmq._fast.pop_lane.frame``, which writes the usual answers straight
    from header pieces cut from this encoder's text (``bind_frame``)."""
    if len(answer) == 2:
        return answer_frame(answer[0], answer[1], None, None, 0, opaque, stype)
    code, remark, ext, body, size = answer
    return answer_frame(code, remark, answer_ext(ext), body, size, opaque, stype)


# placeholders of a found pop's header values (popTime, invisibleTime,
# reviveQid, restNum, startOffsetInfo, msgOffsetInfo; the opaque) and of a
# plain answer's (code, opaque): each occurs once in the encoded header
_POP_MARKS = ("-9000000000000000001", "-9000000000000000002", "-9000000000000000003",
              "-9000000000000000004", "@@startOffsetInfo@@", "@@msgOffsetInfo@@")
_OPAQUE_MARK = -2147480001
_CODE_MARK = -2147480002


def _pop_marks_header() -> bytes:
    ext = dict(zip(("popTime", "invisibleTime", "reviveQid", "restNum", "startOffsetInfo",
                    "msgOffsetInfo"), _POP_MARKS, strict=True))
    return answer_frame(ResponseCode.SUCCESS, None, ext, None, 0, _OPAQUE_MARK, 0)[8:]


def bind_frame(c: Any) -> None:
    """Hand the compiled ``read_request`` the remoting decoder's error and the
    compiled ``frame`` the header pieces of the general encoder (a found
    pop's, a plain answer's); a header the marks do not cut cleanly leaves
    those answers to the twin."""
    opaque = str(_OPAQUE_MARK).encode()
    pop = codec.header_pieces(_pop_marks_header(), [m.encode() for m in _POP_MARKS] + [opaque])
    plain = codec.header_pieces(answer_frame(_CODE_MARK, None, None, None, 0, _OPAQUE_MARK, 0)[8:],
                                [str(_CODE_MARK).encode(), opaque])
    c.bind(RemotingCommandError, PopResult, frame, *(pop or (None, None)),
           *(plain or (None, None)))


class PopLaneSupport:
    """What both lanes (compiled and twin) do between reading a request and
    writing its answer; built once per broker from its pop and ack processors."""

    # plain slots: the compiled lane's ``take`` reads them at their offsets
    __slots__ = ("pop", "ack", "pop_queue", "ack_queue", "revive", "served", "read", "frame",
                 "_later")

    def __init__(self, pop: Any, ack: Any) -> None:
        self.pop = pop
        self.ack = ack
        self.pop_queue = pop.c.request_queues["pull"]
        self.ack_queue = ack.c.request_queues["consumer_manager"]
        self.revive = pop.ctx.revive
        self.served = 0  # requests the lane answered (GET_BROKER_RUNTIME_INFO rmqPopLaneServed)
        # the request reader and answer writer, compiled when built: handed to
        # the compiled lane with the rest
        self.read, self.frame = make_codec()
        self._later: set[asyncio.Future] = set()  # answered later: held until done

    def take(self, channel: Any, code: int, ext: dict | None, body: Any) -> Any:
        """Serve one request of the lane's codes: its answer as the processor
        function returns it (``(code, remark, ext, body, size)`` for a pop,
        ``(code, remark)`` for an ack), a Task that completes with it, or None
        when the general path is to serve it (nothing done).  The compiled
        lane runs its compiled twin (``rmq._fast.pop_lane.take``) instead of
        this method, for a support whose class has not replaced it."""
        if code == POP:
            if body is not None or not self.pop_queue.runs_at_once():
                return None
            if not self.revive.loaded:
                self.revive.ensure_loaded()
            got = lane_pop(self.pop, channel, ext or {})
            if got is None:
                return None
            self.served += 1
            return got if type(got) is tuple else run_eagerly(got)
        if not self.ack_queue.runs_at_once():
            return None
        self.served += 1
        if code == BATCH_ACK:
            got = batch_ack_now(self.ack, body if body is not None else b"")
            return got if type(got) is tuple else run_eagerly(got)
        return run_eagerly(self.ack.ack_answer(ext or {}))

    def failed_frame(self, channel: Any, code: int, opaque: int, stype: int,
                     exc: BaseException) -> bytes:
        """A taken request that raised: logged and answered SYSTEM_ERROR with
        the exception, as the remoting layer answers a processor that raised."""
        log.error("pop lane: process request code %d from %s failed", code,
                  channel.remote_addr, exc_info=exc)
        return codec.encode(ResponseCode.SYSTEM_ERROR, 0, CURRENT_VERSION, opaque, RPC_RESPONSE,
                            exception_remark(exc), None, stype, 0)

    def later(self, channel: Any, task: asyncio.Future, code: int, opaque: int,
              stype: int) -> None:
        """Answer a taken request whose coroutine suspended when it completes."""
        def done(fut: asyncio.Future) -> None:
            self._later.discard(fut)
            if fut.cancelled():
                return
            exc = fut.exception()
            try:
                frame = self.frame(fut.result(), opaque, stype) if exc is None else None
            except Exception as e:  # noqa: BLE001 - an unencodable answer is a failure too
                exc = e
                frame = None
            if frame is None:
                frame = self.failed_frame(channel, code, opaque, stype, exc)
            channel.write_bytes(frame)

        self._later.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(done)


_HEADS = (b'{"code":200050', b'{"code":200051', b'{"code":200151')
_DIGITS = b"0123456789"


def names_lane_code(frame) -> bool:
    """The look both lanes take before decoding a frame (the bytes after the
    length prefix): a JSON header that starts ``{"code":`` with one of the
    lane's codes, as every client's encoder writes it.  Anything else -- a
    ROCKETMQ header (its 16-bit code cannot hold the 5.x codes), other
    spacing, another code -- is left to the general path and the other lanes
    without the cost of a decode."""
    return (len(frame) >= 19 and frame[0] == 0 and bytes(frame[4:18]) in _HEADS
            and frame[18] not in _DIGITS)


def read_request(frame) -> tuple[int, int, int, dict | None, Any] | None:
    """``(code, opaque, serialize type, extFields, body)`` of a request frame
    (the bytes after the length prefix) of one of the lane's codes, read by
    the general decoder; None for any other frame, a oneway request or a
    header the general path would refuse."""
    if not names_lane_code(frame):
        return None
    try:
        code, _lang, _ver, opaque, flag, _remark, ext, stype, off = codec.decode(frame)
    except RemotingCommandError:
        return None
    if (code != POP and code != BATCH_ACK and code != ACK) or flag & (RPC_RESPONSE | RPC_ONEWAY):
        return None
    return code, opaque, stype, ext, (frame[off:] if off < len(frame) else None)


class PopLane:
    """Pure-Python twin of ``rmq._fast.pop_lane.PopLane`` (see the module docstring)."""

    def __init__(self, support: PopLaneSupport, max_frame: int, service: Any = None) -> None:
        self.support = support
        self.max_frame = max_frame
        self.service = service
        self._admissions = lane_admissions(service)
        self._counts: dict[tuple[int, int], int] = {}

    def served(self) -> list[tuple[int, bool, int, int]]:
        """(request code, oneway, count, response code) of what the last
        ``serve`` took (a request answered later counted as SUCCESS)."""
        return [(code, False, n, response) for (code, response), n in self._counts.items()]

    def serve(self, channel: Any, buf, pos: int, end: int) -> tuple[int, bytes | None]:
        """Serve the lane's requests at the start of ``buf[pos:end]``; returns
        the position of the first frame left to the general path and the
        answers to write (None when there are none)."""
        self._counts = counts = {}
        support = self.support
        out: list[bytes] = []
        while end - pos >= 4:
            length = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
            if length < 4 or length > self.max_frame or end - pos - 4 < length:
                break
            got = read_request(buf[pos + 4:pos + 4 + length])
            if got is None:
                break
            code, opaque, stype, ext, body = got
            adm = self._admissions.get(code)
            if adm is not None and adm.in_flight >= adm.limit:
                break  # the general path answers it SYSTEM_BUSY
            try:
                answer = support.take(channel, code, ext, body)
            except Exception as exc:  # noqa: BLE001 - answered as the general path would
                out.append(support.failed_frame(channel, code, opaque, stype, exc))
                response = SYSTEM_ERROR
            else:
                if answer is None:
                    break
                if type(answer) is tuple:
                    out.append(support.frame(answer, opaque, stype))
                    response = answer[0]
                else:
                    support.later(channel, answer, code, opaque, stype)
                    if self.service is not None:
                        self.service.hold(answer, adm)
                    response = 0
            key = (code, response)
            counts[key] = counts.get(key, 0) + 1
            pos += 4 + length
        return pos, (b"".join(out) if out else None)


def lane_admissions(service: Any) -> dict[int, Any]:
    """The in-flight counts (``Admission``) that bound the lane's codes on
    ``service``, the server whose connections the lane reads: the lane takes
    a request only under its bound and counts one answered later against it
    until done (``service.hold``), as the general path does, so that a pop
    waiting in the lane fills the same room as one waiting there.  None
    (no server: a test's lane) bounds nothing."""
    if service is None:
        return {}
    got = {code: service.admission_of(code) for code in (POP, ACK, BATCH_ACK)}
    return {code: adm for code, adm in got.items() if adm is not None}


def make_codec() -> tuple[Any, Any]:
    """``read_request`` and ``frame``: compiled when built (bound), else the twins."""
    c = compiled("pop_lane")
    if c is None:
        return read_request, frame
    bind_frame(c)
    # the compiled lane runs the compiled twin of ``PopLaneSupport.take``
    # for a support whose ``take`` is that one
    c.bind_take(PopLaneSupport, lane_pop, batch_ack_now, run_eagerly, RequestQueue)
    return c.read_request, c.frame


def make_pop_lane(support: PopLaneSupport, max_frame: int, service: Any = None) -> Any:
    """A pop lane for ``service``, a server reading frames up to
    ``max_frame`` bytes: compiled when built, else the twin."""
    c = compiled("pop_lane")
    return (PopLane if c is None else c.PopLane)(support, max_frame, service)
