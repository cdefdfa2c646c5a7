"""The pull lane: PULL_MESSAGE requests that find messages, served straight
from a connection's receive buffer.

A consumer's connection carries runs of pulls.  The general path turns each
into a ``RemotingCommand`` (the JSON header decoded into a dict), runs it
through the dispatcher, the pull queue and the processor, and queues the
response (header encoded from another dict, the records as views of the
mapped commit log) until the end of the loop's turn, so the answers to all
the pulls of one read leave together, after the last one is made, and the
consumer waits for all of them.  The lane reads the header's values where
they lie, runs the processor's own checks (``PullMessageProcessor.admit``),
reads the store, and writes the first answer of a read at once -- the
consumer starts on it while the broker makes the others -- and the others
together when the loop's turn ends: fewer writes (and reads on the
consumer's side, which on loopback also do the other side's TCP work) than
one write per answer, measured faster than either one write per answer or
one per read.  The first answer is one frame with its records copied behind
the header (``Channel.write_bytes`` writes one buffer at once); the others
are ``FoundResponse`` commands queued on the channel with their records as
the views the store read, written without a copy.

The lane takes only what it answers exactly as the general path would: a
JSON or ROCKETMQ header it reads for certain (answered in the same
serialization), a request the pull queue would run at
once, checks that pass, no record filter (SQL92, filterSupportRetry), and a
read that FOUND messages -- a read that finds nothing is dropped uncounted
(``read_messages``) and the general path reads again, answers, holds the
pull (long polling) or reports the moved offset.  What the lane answers has
the general path's bytes (the header pieces are cut from what the general
encoder writes, ``FoundHeader``) and statistics: the store's getMessage
counts, GROUP_GET_* with their latency, the fall-behind moments, the offset
commit.  The first frame the lane does not take ends its turn; that frame
goes the general way, then the lane tries again.

``PullLane`` here is the pure-Python twin of ``rmq._fast.pull_lane.PullLane``
(same constructor, same ``serve``); both share ``PullLaneSupport`` for
everything between the header and the answer.  ``make_pull_lane`` picks
the compiled one when built.
"""

from __future__ import annotations

import logging
import struct
import time
from typing import Any

from rmq._fast import compiled
from rmq.broker.processor.pull import PullHeader
from rmq.common.codes import CURRENT_VERSION, RequestCode, ResponseCode
from rmq.remoting import codec
from rmq.remoting.abstract import exception_remark
from rmq.remoting.command import RPC_ONEWAY, RPC_RESPONSE, RemotingCommand
from rmq.remoting.exceptions import RemotingCommandError
from rmq.store.results import GetMessageStatus

log = logging.getLogger("rmq.broker")

PULL = int(RequestCode.PULL_MESSAGE)
FOUND = GetMessageStatus.FOUND
_PREFIX = struct.Struct(">ii")

# placeholders of the five numbers of a FOUND response header: the four
# extFields values (strings) and the opaque (an int)
_EXT_MARKS = ("-9000000000000000001", "-9000000000000000002", "-9000000000000000003",
              "-9000000000000000004")
_OPAQUE_MARK = -2147480001


class FoundHeader:
    """The JSON header of a FOUND pull response -- SUCCESS, remark FOUND,
    extFields suggestWhichBrokerId, nextBeginOffset, minOffset, maxOffset,
    the request's opaque -- as pieces of text with the five numbers between
    them.  The pieces are cut from what the general encoder writes for
    placeholder values, so the lane's header is the general path's whatever
    key order or spacing the encoder uses; ``ok`` is False (and the lane
    stays off) if rendering does not reproduce the encoder for sample values."""

    def __init__(self) -> None:
        frame = self._encode(*_EXT_MARKS, _OPAQUE_MARK)
        header = frame[8:]
        marks = [s.encode() for s in _EXT_MARKS] + [str(_OPAQUE_MARK).encode()]
        cut = codec.header_pieces(header, marks)
        # which number (0-3 extFields, 4 opaque) follows piece i
        self.pieces, self.order = cut if cut is not None else ([], [])
        self.ok = cut is not None
        if self.ok:
            self.ok = all(self.render(*v, 0) == self._encode(*map(str, v[:4]), v[4])
                          for v in ((0, 0, 0, 0, 0), (1, 32, 0, 12416, 1000000001),
                                    (-1, 2**63 - 1, -(2**63), 7, -(2**31)),
                                    (3, 123456789, 98765, 123456790, 2**31 - 1)))

    @staticmethod
    def _encode(suggest: str, next_begin: str, min_offset: str, max_offset: str,
                opaque: int) -> bytes:
        ext = {"suggestWhichBrokerId": suggest, "nextBeginOffset": next_begin,
               "minOffset": min_offset, "maxOffset": max_offset}
        return codec.encode(ResponseCode.SUCCESS, 0, CURRENT_VERSION, opaque, RPC_RESPONSE,
                            FOUND.name, ext, 0, 0)

    def render(self, suggest: int, next_begin: int, min_offset: int, max_offset: int,
               opaque: int, body_len: int) -> bytes:
        """Length prefix, header-length word and header of a response whose
        records take ``body_len`` bytes."""
        values = (suggest, next_begin, min_offset, max_offset, opaque)
        parts = [self.pieces[0]]
        for i, which in enumerate(self.order):
            parts.append(str(values[which]).encode())
            parts.append(self.pieces[i + 1])
        head = b"".join(parts)
        return _PREFIX.pack(4 + len(head) + body_len, len(head)) + head


class FoundResponse(RemotingCommand):
    """A FOUND pull response whose header is already rendered (``FoundHeader``)
    and whose body is the records' views: queued on a channel like any
    response, written with its records uncopied.  ``encode_header`` returns
    the rendered header; the extFields it carries live only there."""

    __slots__ = ("_head",)

    def __init__(self, head: bytes, opaque: int, views: list) -> None:
        super().__init__(ResponseCode.SUCCESS, 0, CURRENT_VERSION, opaque, RPC_RESPONSE,
                         FOUND.name, None, views, 0)
        self._head = head

    def encode_header(self) -> bytes:
        return self._head


class PullLaneSupport:
    """What both lanes (compiled and twin) do between reading a pull's header
    and writing its answer; built once per broker from its pull processor."""

    def __init__(self, processor: Any) -> None:
        self.processor = processor
        self.store = processor.store
        self.queue = processor.c.request_queues["pull"]
        self.head = FoundHeader()
        self.served = 0  # pulls the lane answered (GET_BROKER_RUNTIME_INFO rmqPullLaneServed)
        # what a lane builds per pull, handed to the compiled one with the rest
        self.make_header = PullHeader.make
        self.response = FoundResponse
        self.render_rocketmq = rocketmq_found_header
        if not self.head.ok:
            log.warning("the pull lane is off: the response encoder's output cannot be "
                        "rendered from pieces")

    def has_messages(self, topic: str, queue_id: int, offset: int) -> bool:
        """Whether the queue holds messages from ``offset`` on: a caught-up
        consumer's pull (which long polling holds) or one beyond the end is
        left to the general path before anything else is done for it."""
        return offset < self.store.get_max_offset_in_queue(topic, queue_id)

    def take(self, channel: Any, h: PullHeader) -> tuple | None:
        """Answer the pull ``h`` if it finds messages: every check and
        statistic of the general path, the offset commit, and
        ``(record views, suggestWhichBrokerId, nextBeginOffset, minOffset,
        maxOffset, bytes)`` for the response; None (nothing done that the
        general path would see) for anything else."""
        begin_ns = time.monotonic_ns()
        if not self.queue.runs_at_once():
            return None  # requests wait in the pull queue: this one waits behind them
        p = self.processor
        store = self.store
        try:
            error, group_cfg, record_filter, matches = p.admit(channel, h)
            if error is not None or record_filter is not None:
                return None
            begin_ms = time.time_ns() // 1_000_000
            result = store.read_messages(h.consumerGroup, h.topic, h.queueId, h.queueOffset,
                                         h.maxMsgNums, None, matches)
        except Exception:  # noqa: BLE001 - the general path meets it again and answers it
            return None
        if result is None or result.status is not FOUND:
            if result is not None:
                result.release()
            return None
        store.count_get(result, begin_ms)
        p.record_fall_size(h, result)
        suggest = p.suggest_broker(group_cfg, result)
        p.count_found(h, result, begin_ns)
        p.commit_offset(channel, h, result.next_begin_offset)
        self.served += 1
        return (result.body_views, suggest, result.next_begin_offset, result.min_offset,
                result.max_offset, result.buffer_total_size)


    def failed(self, channel: Any, opaque: int, exc: Exception) -> None:
        """A pull the lane took failed after the store was read (a statistic,
        the offset commit): logged and answered SYSTEM_ERROR with the
        exception, as the remoting layer answers a processor that raised."""
        log.error("pull lane: process request code %d from %s failed", PULL,
                  channel.remote_addr, exc_info=exc)
        channel.send_response(RemotingCommand(ResponseCode.SYSTEM_ERROR, 0, CURRENT_VERSION,
                                              opaque, RPC_RESPONSE, exception_remark(exc),
                                              None, None, 0))


def read_pull(frame) -> tuple[int, PullHeader, int] | None:
    """``(opaque, header, serialize type)`` of a PULL_MESSAGE request frame
    (the bytes after the length prefix) with a JSON or ROCKETMQ header and no
    body, read by the general decoder; None for any other frame or a header
    the general path would refuse."""
    if len(frame) < 4 or frame[0] > codec.ROCKETMQ:
        return None  # an unknown serialization
    try:
        code, _lang, _ver, opaque, flag, _remark, ext, stype, off = codec.decode(frame)
        if code != PULL or flag & (RPC_RESPONSE | RPC_ONEWAY) or off != len(frame) \
                or ext is None:
            return None
        return opaque, PullHeader.parse(ext), stype
    except RemotingCommandError:
        return None


def pull_head(buf, pos: int, end: int, max_frame: int, make=None) -> tuple | None:
    """The general reader's view of the pull request at ``buf[pos:end]``
    (twin of the compiled ``pull_head``, which may leave more to the general
    path but must read the same where it does not): (opaque, serialize type,
    header), or None."""
    if end - pos < 8:
        return None
    length = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
    if length < 4 or length > max_frame or end - pos - 4 < length:
        return None
    got = read_pull(buf[pos + 4:pos + 4 + length])
    return None if got is None else (got[0], got[2], got[1])


def rocketmq_found_header(suggest: int, next_begin: int, min_offset: int, max_offset: int,
                          opaque: int, body_len: int) -> bytes:
    """``FoundHeader.render`` for a ROCKETMQ-serialized pull: the general
    encoder's frame prefix and header of the FOUND response (its values are
    length-prefixed, so it is encoded whole rather than from pieces)."""
    ext = {"suggestWhichBrokerId": str(suggest), "nextBeginOffset": str(next_begin),
           "minOffset": str(min_offset), "maxOffset": str(max_offset)}
    return codec.encode(ResponseCode.SUCCESS, 0, CURRENT_VERSION, opaque, RPC_RESPONSE,
                        FOUND.name, ext, codec.ROCKETMQ, body_len)


class PullLane:
    """Pure-Python twin of ``rmq._fast.pull_lane.PullLane`` (see the module docstring)."""

    def __init__(self, support: PullLaneSupport, max_frame: int) -> None:
        self.support = support
        self.max_frame = max_frame
        self._taken = 0

    def served(self) -> list[tuple[int, bool, int]]:
        """(request code, oneway, count) of what the last ``serve`` took."""
        return [(PULL, False, self._taken)] if self._taken else []

    def serve(self, channel: Any, buf, pos: int, end: int) -> tuple[int, bytes | None]:
        """Serve the pulls at the start of ``buf[pos:end]`` that find messages:
        the first answer written at once, the others queued on the channel
        (written together when the loop's turn ends); returns the position of
        the first frame left to the general path (and None: nothing is left
        for the caller to write)."""
        self._taken = 0
        support = self.support
        head = support.head
        while end - pos >= 4:
            length = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
            if length < 4 or length > self.max_frame or end - pos - 4 < length:
                break
            pull = read_pull(buf[pos + 4:pos + 4 + length])
            if pull is None:
                break
            opaque, h, stype = pull
            if not support.has_messages(h.topic, h.queueId, h.queueOffset):
                break
            try:
                taken = support.take(channel, h)
            except Exception as exc:  # noqa: BLE001 - answered as the general path would
                support.failed(channel, opaque, exc)
                taken = False
            if taken is None:
                break
            if taken:
                views, suggest, next_begin, min_offset, max_offset, size = taken
                render = rocketmq_found_header if stype == codec.ROCKETMQ else head.render
                frame = render(suggest, next_begin, min_offset, max_offset, opaque, size)
                if self._taken == 0:
                    channel.write_bytes(b"".join([frame, *views]))
                else:
                    channel.send_response(FoundResponse(frame, opaque, views))
            pos += 4 + length
            self._taken += 1
        return pos, None


def make_pull_lane(support: PullLaneSupport, max_frame: int) -> Any:
    """A pull lane for a server reading frames up to ``max_frame`` bytes:
    compiled when built, else the twin; None when the response header cannot
    be rendered (``FoundHeader.ok``)."""
    if not support.head.ok:
        return None
    c = compiled("pull_lane")
    return (PullLane if c is None else c.PullLane)(support, max_frame)
