"""The compiled send lane reads a request header exactly as the general
reader does, or leaves it to the general path: for every header it takes,
``send_head`` (compiled) equals the twin's reading (codec.decode + the
field names of the request's spelling)."""

from __future__ import annotations

import random
import struct
from types import SimpleNamespace

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq._fast import compiled_or_none
from rmq.broker.processor.send_support import V1_KEYS, V2_KEYS
from rmq.broker.send_lane import SendLaneSupport, send_head
from rmq.common.topic_config import MULTI_TAG, SINGLE_TAG, TopicConfig
from rmq.remoting.command import RemotingCommand

_C = compiled_or_none("send_lane")
MAX = 1 << 20

pytestmark = pytest.mark.skipif(_C is None, reason="the compiled send lane is not built")

_value = st.one_of(
    st.text(max_size=20),
    st.text(alphabet="\x01\x02\"\\/é\u2028\U0001F600ab", max_size=12),
    st.integers(-(2**62), 2**62),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.just([1, {"x": None}]),
)


def _frame(header: bytes, body: bytes = b"body", stype: int = 0) -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), (stype << 24) | len(header)) \
        + header + body


@st.composite
def _header(draw) -> bytes:
    code = draw(st.sampled_from([10, 310, 310, 320, 11]))
    keys = V2_KEYS if code == 310 else V1_KEYS
    ext = {}
    for k in keys:
        if draw(st.integers(0, 5)):
            ext[k] = draw(_value)
    for k in draw(st.lists(st.sampled_from(["AccessKey", "x", "é", "Signature"]), max_size=3)):
        ext[k] = draw(_value)
    top = {"code": code, "extFields": ext,
           "flag": draw(st.sampled_from([0, 0, 1, 2, None, "0"])),
           "language": draw(st.sampled_from(["JAVA", "CPP", 7, None])),
           "opaque": draw(st.integers(-(2**31), 2**31 - 1)),
           "remark": draw(st.sampled_from([None, "", "r", 5])),
           "serializeTypeCurrentRPC": "JSON", "version": draw(st.sampled_from([409, 63]))}
    items = list(top.items())
    draw(st.randoms()).shuffle(items)
    text = orjson.dumps(dict(items))
    if draw(st.booleans()):
        text = text.replace(b",", b" , ").replace(b":", b": ") + b"\n"
    return text


@settings(max_examples=1500, deadline=None)
@given(_header(), st.binary(max_size=40))
def test_compiled_head_reads_what_the_general_reader_reads(header, body):
    buf = memoryview(bytearray(b"\0\0" + _frame(header, body) + b"tail"))
    got = _C.send_head(buf, 2, len(buf) - 4, MAX)
    if got is not None:
        assert got == send_head(buf, 2, len(buf) - 4, MAX)


def test_plain_headers_are_taken():
    ext = {"a": "g", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "17", "h": "0",
           "i": "TAGS\x01A\x02WAIT\x01true", "j": "0", "k": "false", "m": "false", "n": "b"}
    head = orjson.dumps({"code": 310, "extFields": ext, "flag": 0, "language": "JAVA",
                         "opaque": 5, "serializeTypeCurrentRPC": "JSON", "version": 409})
    buf = _frame(head, b"xyz")
    want = (310, 0, 5, tuple(ext.get(k) for k in V2_KEYS), 3, len(buf))
    assert _C.send_head(buf, 0, len(buf), MAX) == want == send_head(buf, 0, len(buf), MAX)
    v1 = {"producerGroup": "g", "topic": "T", "defaultTopic": "TBW102",
          "defaultTopicQueueNums": 4, "queueId": 1, "sysFlag": 0, "bornTimestamp": "17",
          "flag": 0, "properties": "", "AccessKey": "", "Signature": "c2ln"}
    cpp = orjson.dumps({"code": 10, "extFields": v1, "flag": 0, "language": "CPP",
                        "opaque": 0, "remark": "", "version": 63}) + b"\n"
    buf = _frame(cpp)
    got = _C.send_head(buf, 0, len(buf), MAX)
    assert got is not None and got[3][4] == "1" and got == send_head(buf, 0, len(buf), MAX)


def test_what_is_left_to_the_general_path():
    ext = {"a": "g", "b": "T"}
    good = {"code": 310, "extFields": ext, "flag": 0, "opaque": 1}
    frame = _frame(orjson.dumps(good))
    assert _C.send_head(frame, 0, len(frame), MAX) is not None
    for bad in ({**good, "code": 11}, {**good, "flag": 1}, {**good, "extFields": None},
                {**good, "extFields": {**ext, "e": 1.5}}, {**good, "opaque": 2**31}):
        frame = _frame(orjson.dumps(bad))
        assert _C.send_head(frame, 0, len(frame), MAX) is None, bad
    frame = _frame(orjson.dumps(good))
    assert _C.send_head(frame, 0, len(frame) - 1, MAX) is None  # incomplete
    assert _C.send_head(frame, 0, len(frame), 10) is None  # over the frame limit
    rocketmq = _frame(orjson.dumps(good), stype=1)  # JSON text under a ROCKETMQ mark
    assert _C.send_head(rocketmq, 0, len(rocketmq), MAX) is None
    other = _frame(orjson.dumps(good), stype=2)
    assert _C.send_head(other, 0, len(other), MAX) is None
    escaped = _frame(orjson.dumps(good).replace(b'"b"', b'"\\u0062"'))
    assert _C.send_head(escaped, 0, len(escaped), MAX) is None
    with pytest.raises(ValueError):
        _C.send_head(frame, 0, len(frame) + 1, MAX)


def test_random_bytes_never_crash():
    rnd = random.Random(5)
    head = orjson.dumps({"code": 310, "extFields": {"a": "g", "b": "T\u00e9"}, "flag": 0})
    frame = bytearray(_frame(head))
    for _ in range(3000):
        mutated = bytearray(frame)
        for _ in range(rnd.randrange(1, 4)):
            mutated[rnd.randrange(len(mutated))] = rnd.randrange(256)
        got = _C.send_head(mutated, 0, len(mutated), MAX)
        if got is not None:
            assert got == send_head(mutated, 0, len(mutated), MAX)


_bin_value = st.one_of(st.text(max_size=12), st.sampled_from(["", "0", "-1", "007", "+5", " 5",
                                                             "2147483648", "TAGS\x01é"]),
                       st.integers(-(2**40), 2**40).map(str))


@st.composite
def _rocketmq_frame(draw) -> bytes:
    """A send request with a ROCKETMQ binary header: the spelling's fields
    as texts (some empty: absent), extra and repeated keys, non-ASCII,
    invalid UTF-8 and now and then a corrupted byte."""
    code = draw(st.sampled_from([10, 310, 310, 320, 11]))
    keys = V2_KEYS if code == 310 else V1_KEYS
    entries = [(k.encode(), draw(_bin_value).encode()) for k in keys if draw(st.integers(0, 6))]
    for k in draw(st.lists(st.sampled_from(["a", "b", "i", "topic", "x", "é", ""]), max_size=3)):
        entries.append((k.encode(), draw(_bin_value).encode()))
    if draw(st.integers(0, 9)) == 0:
        entries.append((b"b", b"\xff\xfe"))
    draw(st.randoms()).shuffle(entries)
    ext = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v
                   for k, v in entries)
    remark = draw(st.sampled_from([b"", b"r", "é".encode(), b"\xff"]))
    head = struct.pack(">hBhiii", code, 0, 409, draw(st.integers(-(2**31), 2**31 - 1)),
                       draw(st.sampled_from([0, 0, 1, 2])), len(remark)) + remark \
        + struct.pack(">i", len(ext)) + ext
    frame = _frame(head, draw(st.binary(max_size=20)), stype=1)
    if draw(st.integers(0, 7)) == 0:
        at = draw(st.integers(8, len(frame) - 1))
        frame = frame[:at] + bytes([draw(st.integers(0, 255))]) + frame[at + 1:]
    return frame


@settings(max_examples=1500, deadline=None)
@given(_rocketmq_frame())
def test_compiled_head_reads_rocketmq_headers_as_the_general_reader(frame):
    buf = memoryview(bytearray(b"\0" + frame + b"xy"))
    got = _C.send_head(buf, 1, len(buf) - 2, MAX)
    if got is not None:
        assert got == send_head(buf, 1, len(buf) - 2, MAX)


def test_java_rocketmq_header_is_taken():
    """SEND_MESSAGE_V2 as the Java client writes it with
    rocketmq.serialize.type=ROCKETMQ: the letters a..n, empty values left out."""
    ext = {"a": "PG", "b": "BenchmarkTest", "c": "TBW102", "d": "4", "e": "3", "f": "0",
           "g": "1700000000000", "h": "0", "i": "KEYS\x01k1\x02WAIT\x01true\x02TAGS\x01T",
           "j": "0", "k": "false", "m": "false"}
    frame = RemotingCommand(310, 0, 409, 77, 0, None, ext, b"body", 1).encode()
    got = _C.send_head(frame, 0, len(frame), MAX)
    assert got == (310, 0, 77, tuple(ext.get(k) for k in V2_KEYS), 4, len(frame))
    assert got == send_head(frame, 0, len(frame), MAX)


# the compiled properties reader is set up by its twin's import, which a twin
# build (RMQ_NO_EXTENSIONS=1) skips: plain_sends is compared in the compiled pass
_built = pytest.mark.compiled_only


class _Topics:
    """The support ``plain_sends`` reads: the broker's topic configs (the
    compiled lane looks a topic up in them, the twin asks ``topic``, counted
    in ``asked``), every topic of 4 queues, ``Auto1`` filtered by
    MULTI_TAGS, no ``Auto0``."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.topics = SimpleNamespace(table={
            name: TopicConfig(name, 4, 4, topicFilterType=MULTI_TAG if name == "Auto1"
                              else SINGLE_TAG)
            for name in ("T", "Auto1", "Auto2", "LaneTopic")})

    def topic(self, name: str):
        self.asked.append(name)
        return SendLaneSupport.topic(self, name)


@_built
def test_plain_sends_reads_what_the_twin_reads():
    """The DLedger leader's lane reads a read's leading frames with
    ``plain_sends``: compiled and twin give the same readings (record
    fields, body, stored properties, index keys) from every frame of the
    send lane test's request stream (both header serializations, C++ and
    odd JSON spellings, batches, non-ASCII values, transactions), each frame
    alone and with the frames after it."""
    from rmq.broker.send_lane import SendLane
    from tests.integration.test_send_lane import _stream

    frames, _oneway = _stream(11)
    buf = b"".join(frames)
    comp, twin = _Topics(), _Topics()
    c, t = _C.SendLane(comp, MAX), SendLane(twin, MAX)
    pos = taken = 0
    for frame in frames:
        end = pos + len(frame)
        got = c.plain_sends(b"DefaultCluster", buf, pos, end)
        assert got == t.plain_sends(b"DefaultCluster", buf, pos, end)
        if got:
            taken += 1
            assert len(got) == 1 and got[0][0] == end
        rest = c.plain_sends(b"DefaultCluster", buf, pos, len(buf))
        assert rest == t.plain_sends(b"DefaultCluster", buf, pos, len(buf))
        assert rest[:1] == got
        pos = end
    assert taken > len(frames) // 2
    with pytest.raises(ValueError):
        c.plain_sends(b"DefaultCluster", buf, 0, len(buf) + 1)


@_built
def test_plain_sends_asks_each_topic_once_a_read():
    from rmq.broker.send_lane import SendLane

    frames = [RemotingCommand(310, 0, 409, i, 0, None, {
        "a": "g", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "17", "h": "0",
        "i": "TAGS\x01A", "j": "0", "k": "false", "m": "false"}, b"x", 0).encode() for i in range(3)]
    buf = b"".join(frames)
    for lane in (_C.SendLane(_Topics(), MAX), SendLane(_Topics(), MAX)):
        assert [s[3] for s in lane.plain_sends(b"C", buf, 0, len(buf))] == [0, 1, 2]
        assert len(lane.plain_sends(b"C", buf, 0, len(buf))) == 3
        # a topic's config read again in the next call (a read): gone, it takes none
        del lane.support.topics.table["T"]
        assert lane.plain_sends(b"C", buf, 0, len(buf)) == []
    assert lane.support.asked == ["T", "T", "T"]  # the twin: once per call, not per frame


@_built
def test_plain_sends_looks_topics_up_as_the_support_does():
    """The compiled lane looks a read's topics up in the broker's topic
    configs itself (their fields at their slots), as the twin's
    ``SendLaneSupport.topic`` does: a retry topic and a topic sends may not
    use are left to the general path though configured, a missing one too,
    a MULTI_TAG topic's sends stored with MULTI_TAGS, a queue id past both
    queue numbers left."""
    from rmq.broker.send_lane import SendLane
    from rmq.common.message import MULTI_TAGS_FLAG
    from rmq.common.topics import RETRY_GROUP_TOPIC_PREFIX, SCHEDULE_TOPIC

    retry = RETRY_GROUP_TOPIC_PREFIX + "g"
    table = {name: TopicConfig(name, 4, 2, topicFilterType=MULTI_TAG if name == "M" else SINGLE_TAG)
             for name in ("T", "M", retry, SCHEDULE_TOPIC)}
    table["F"] = TopicConfig("F", 1, 8)  # (read 1, write 8)
    cases = [(topic, queue) for topic in ("T", "M", retry, SCHEDULE_TOPIC, "Missing")
             for queue in (0, 3)] + [("F", 7), ("F", 8)]
    for i, (topic, queue) in enumerate(cases):
        frame = RemotingCommand(310, 0, 409, i, 0, None, {
            "a": "g", "b": topic, "c": "TBW102", "d": "4", "e": str(queue), "f": "0",
            "g": "17", "h": "0", "i": "TAGS\x01A", "j": "0", "k": "false", "m": "false"},
            b"x", 0).encode()
        got = []
        for lane in (_C.SendLane(_Topics(), MAX), SendLane(_Topics(), MAX)):
            lane.support.topics.table = table
            got.append(lane.plain_sends(b"C", frame, 0, len(frame)))
        assert got[0] == got[1]
        stored = topic in ("T", "M", "F") and queue < (8 if topic == "F" else 4)
        assert len(got[0]) == stored, (topic, queue)
        if stored:
            assert bool(got[0][0][7] & MULTI_TAGS_FLAG) is (topic == "M")
