"""The fuzz targets: one function per decoder that reads outside input.

A target takes the fuzzer's bytes, feeds them to the decoder and returns.
The decoder may refuse the input only with the error its callers handle
(``ALLOWED`` below: the error a processor turns into a response code with a
remark, or a recovery into a truncation); any other exception is a crash.
Where a decoder has a compiled implementation and a pure-Python twin, the
target runs both (differential fuzzing): they must return the same values
or both refuse.  The twin is the one atheris instruments, so its branches
steer the search for both.

Imported by ``fuzz/run.py`` inside ``atheris.instrument_imports()``; the
regression tests (tests/unit/test_fuzz_corpus.py) import it plainly and
replay the committed corpus through every target.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

from rmq._fast import compiled_or_none
from rmq.acl.errors import AclException
from rmq.acl.plain_config import load_yaml, mapping_of, parse_rules
from rmq.broker.pop_lane import PopLane as TwinPopLane
from rmq.broker.pop_lane import read_request as pop_read_request
from rmq.broker.processor.client_manage import decode_heartbeat
from rmq.broker.processor.pull import PullHeader
from rmq.broker.pull_lane import pull_head as lane_pull_head
from rmq.broker.send_lane import send_head as lane_send_head
from rmq.common.exceptions import RemotingCommandError
from rmq.common.properties import parse_properties
from rmq.common.topic_config import RegisterBodyError, RegisterBrokerBody
from rmq.filter.expression import FilterError
from rmq.filter.parser import parse as parse_sql92
from rmq.remoting import codec
from rmq.store import message_codec as mcodec

C_REMOTING = compiled_or_none("remoting_codec")
C_STORE = compiled_or_none("store_codec")
C_SEND_LANE = compiled_or_none("send_lane")
C_PULL_LANE = compiled_or_none("pull_lane")
C_POP_LANE = compiled_or_none("pop_lane")

MAX_FRAME = 1 << 20
_HOST = bytes([127, 0, 0, 1, 0, 0, 0x2A, 0x9F])


class Mismatch(AssertionError):
    """The compiled decoder and its twin disagree on an input."""


def _same(what: str, twin, comp) -> None:
    if twin != comp:
        raise Mismatch(f"{what}: twin {twin!r} != compiled {comp!r}")


def _outcome(fn: Callable, *args, allowed: type[BaseException] | tuple = ()):
    """(True, value) or (False, error type name) for an allowed refusal."""
    try:
        return True, fn(*args)
    except allowed as e:
        return False, type(e).__name__


# --- remoting -----------------------------------------------------------------
def frames(data: bytes) -> None:
    """Bytes as they arrive on a connection: every complete frame, both header
    encodings, up to the first bad frame."""
    view = memoryview(bytearray(data))
    twin = codec.py_decode_frames(view, 0, len(data), MAX_FRAME)
    if C_REMOTING is not None:
        comp = C_REMOTING.decode_frames(view, 0, len(data), MAX_FRAME)
        _same("decode_frames frames", twin[0], comp[0])
        _same("decode_frames position", twin[1], comp[1])
        _same("decode_frames error", twin[2] is None, comp[2] is None)


def _header(data: bytes, serialize_type: int) -> None:
    frame = ((serialize_type << 24) | len(data)).to_bytes(4, "big") + data
    twin = _outcome(codec.py_decode, frame, allowed=RemotingCommandError)
    if C_REMOTING is not None:
        comp = _outcome(C_REMOTING.decode, frame, allowed=RemotingCommandError)
        _same("decode", twin, comp)


def header_json(data: bytes) -> None:
    """A JSON (fastjson) command header."""
    _header(data, codec.JSON)


def header_rocketmq(data: bytes) -> None:
    """A ROCKETMQ (binary) command header."""
    _header(data, codec.ROCKETMQ)


# --- store ------------------------------------------------------------------------
def stored_message(data: bytes) -> None:
    """Commit-log records as recovery, dispatch and pulls read them (the first
    byte chooses whether the body CRC is checked)."""
    check_crc = bool(data[:1]) and data[0] & 1 == 1
    buf = bytearray(data[1:])
    twin = mcodec._scan_record(buf, 0, len(buf), check_crc)
    if C_STORE is not None:
        _same("scan_record", twin, C_STORE.scan_record(buf, 0, len(buf), check_crc))
    _outcome(mcodec.decode_messages, buf, allowed=ValueError)


def batch(data: bytes) -> None:
    """A SEND_BATCH_MESSAGE body: validated, then re-encoded as stored records."""
    props = b"" if not data or data[0] & 1 else b"CLUSTER\x01c\x02"
    wire = data[1:]
    twin = _outcome(mcodec._batch_size, wire, 0, 5, len(props), allowed=ValueError)
    if C_STORE is not None:
        _same("batch_size", twin, _outcome(C_STORE.batch_size, wire, 0, 5, len(props),
                                           allowed=ValueError))
    ok, value = twin
    if not ok or value[0] > 1 << 22:
        return
    size, count = value
    out = bytearray(size)
    sizes = mcodec.new_sizes_array(count)
    args = (0, wire, 3, 0, 1, _HOST, 2, _HOST, 0, b"Topic", props, 10, 4096)
    written = mcodec._write_batch(out, *args, sizes)
    _same("write_batch size", size, written)
    if C_STORE is not None:
        out_c = bytearray(size)
        sizes_c = mcodec.new_sizes_array(count)
        C_STORE.write_batch(out_c, *args, sizes_c)
        _same("write_batch bytes", bytes(out), bytes(out_c))
        _same("write_batch sizes", list(sizes), list(sizes_c))


# --- request bodies -------------------------------------------------------------
def heartbeat(data: bytes) -> None:
    """HEART_BEAT body (JSON, with fastjson's dialect as the fallback)."""
    _outcome(decode_heartbeat, data, allowed=(ValueError, KeyError, TypeError))


def register_broker(data: bytes) -> None:
    """REGISTER_BROKER body, plain JSON or (first byte odd) the compressed
    binary form, deflated here so the search reaches its inner layout."""
    compressed = bool(data[:1]) and data[0] & 1 == 1
    body = zlib.compress(data[1:]) if compressed else data[1:]
    _outcome(RegisterBrokerBody.decode, body, compressed, allowed=RegisterBodyError)


# --- text formats -------------------------------------------------------------------
_SQL_CONTEXT = {"a": 1, "b": "abc", "c": 2.5, "d": True, "TAGS": "TagA", "n": None}


def sql92(data: bytes) -> None:
    """A SQL92 subscription expression: compiled, then evaluated."""
    ok, expr = _outcome(parse_sql92, data.decode("utf-8", "replace"), allowed=FilterError)
    if ok:
        expr.matches(_SQL_CONTEXT)


def properties(data: bytes) -> None:
    """A broker.conf / namesrv.conf file (java.util.Properties syntax)."""
    parse_properties(data.decode("utf-8", "replace"))


def plain_acl(data: bytes) -> None:
    """A plain_acl.yml file."""
    path = "plain_acl.yml"
    try:
        mapping = mapping_of(load_yaml(data.decode("utf-8", "replace"), path), path)
        parse_rules(path, mapping)
    except AclException:
        pass


def send_head(data: bytes) -> None:
    """A send request as the send lane reads it from a receive buffer: where
    the compiled lane takes a frame, it must read what the general reader
    reads (the lane may leave more frames to the general path)."""
    if C_SEND_LANE is None:
        return
    view = memoryview(bytearray(data))
    comp = C_SEND_LANE.send_head(view, 0, len(data), MAX_FRAME)
    if comp is not None:
        _same("send_head", lane_send_head(view, 0, len(data), MAX_FRAME), comp)


def _pull_fields(got: tuple | None) -> tuple | None:
    if got is None:
        return None
    return got[0], got[1], tuple(getattr(got[2], f) for f in PullHeader.__slots__)


def pull_head(data: bytes) -> None:
    """A pull request (JSON or ROCKETMQ header) as the pull lane reads it:
    where the compiled lane takes a frame, it must read what the general
    reader reads."""
    if C_PULL_LANE is None:
        return
    view = memoryview(bytearray(data))
    comp = C_PULL_LANE.pull_head(view, 0, len(data), MAX_FRAME, PullHeader.make)
    if comp is not None:
        _same("pull_head", _pull_fields(lane_pull_head(view, 0, len(data), MAX_FRAME)),
              _pull_fields(comp))


class _PopSupport:
    """A pop lane's support that records what the lane hands it and answers
    every request (a pop whose group is ``decline`` is left to the general
    path), so that the compiled lane's frame walk is compared with the twin's."""

    def __init__(self) -> None:
        self.calls: list = []
        self.read = pop_read_request

    def take(self, _channel, code: int, ext: dict | None, body) -> tuple | None:
        self.calls.append((code, ext, None if body is None else bytes(body)))
        if ext and ext.get("consumerGroup") == "decline":
            return None
        return (0, None) if code != 200050 else (0, None, {"popTime": "1"}, None, 0)

    @staticmethod
    def frame(answer: tuple, opaque: int, stype: int) -> bytes:
        return repr((answer, opaque, stype)).encode()

    def failed_frame(self, *_args) -> bytes:  # take never raises here
        raise AssertionError("unreachable")

    def later(self, *_args) -> None:  # take never suspends here
        raise AssertionError("unreachable")


def pop_frames(data: bytes) -> None:
    """Frames as the pop lane walks them (POP_MESSAGE, ACK_MESSAGE,
    BATCH_ACK_MESSAGE and anything else): the compiled lane must take the
    same frames as the twin, hand its support the same requests and return
    the same answers."""
    if C_POP_LANE is None:
        return
    view = memoryview(bytearray(data))
    got = []
    for make in (TwinPopLane, C_POP_LANE.PopLane):
        support = _PopSupport()
        lane = make(support, MAX_FRAME)
        got.append((lane.serve(None, view, 0, len(data)), support.calls, sorted(lane.served())))
    _same("pop_frames", *got)


TARGETS: dict[str, Callable[[bytes], None]] = {
    f.__name__: f for f in (frames, header_json, header_rocketmq, stored_message, batch,
                            heartbeat, register_broker, sql92, properties, plain_acl, send_head,
                            pull_head, pop_frames)
}
