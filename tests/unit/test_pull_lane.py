"""The pull lane reads a PULL_MESSAGE header exactly as the general path
does, or leaves it to the general path; the compiled lane and its twin
answer byte for byte alike; the FOUND header it renders is the general
encoder's; a lane that takes nothing leaves the read untouched."""

from __future__ import annotations

import struct

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq._fast import compiled_or_none
from rmq.broker.lanes import Lanes, join_lanes
from rmq.broker.processor.pull import PullHeader
from rmq.broker.pull_lane import (
    FoundHeader,
    FoundResponse,
    PullLane,
    PullLaneSupport,
    pull_head,
    read_pull,
    rocketmq_found_header,
)
from rmq.client.headers import pull_header
from rmq.common.codes import RequestCode
from rmq.remoting import codec
from rmq.remoting.command import RemotingCommand

_C = compiled_or_none("pull_lane")
MAX = 1 << 20
FIELDS = PullHeader.__slots__
LANES = [PullLane] + ([_C.PullLane] if _C is not None else [])
_CL = compiled_or_none("lanes")
# the servers' lanes together: the twin, and the compiled one when built
JOINED = [Lanes] + ([_CL.Lanes] if _CL is not None else [])

int64 = st.integers(-(2**63), 2**63 - 1)


def _frame(header: bytes, body: bytes = b"", stype: int = 0) -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), (stype << 24) | len(header)) \
        + header + body


def _fields(h: PullHeader) -> tuple:
    return tuple(getattr(h, f) for f in FIELDS)


class Support:
    """A stand-in for PullLaneSupport: records what it is asked and answers a
    FOUND read of canned records; unless ``plain`` (for drawn headers, whose
    queue ids may be anything), queue 97 has no messages, queue 99 is
    declined, queue 98 fails."""

    def __init__(self, plain: bool = False) -> None:
        self.special = () if plain else (97, 98, 99)
        self.head = FoundHeader()
        self.asked: list[tuple] = []
        self.failed = PullLaneSupport.failed.__get__(self)
        self.make_header = PullHeader.make
        self.response = FoundResponse
        self.render_rocketmq = rocketmq_found_header

    def has_messages(self, topic: str, queue_id: int, offset: int) -> bool:
        return queue_id != 97 or 97 not in self.special

    def take(self, channel, h: PullHeader):
        self.asked.append(_fields(h))
        if h.queueId == 99 and 99 in self.special:
            return None
        if h.queueId == 98 and 98 in self.special:
            raise KeyError("boom")
        n = max(1, min(h.maxMsgNums, 4))
        views = [memoryview(bytes(range(i, i + 50 + i))) for i in range(n)]
        size = sum(len(v) for v in views)
        return views, h.queueId % 3, h.queueOffset + n, 0, h.queueOffset + 40, size


class Channel:
    """Records what is written at once (``write_bytes``) and what is queued
    (``send_response``), in order."""

    remote_addr = "127.0.0.1:5555"

    def __init__(self) -> None:
        self.out: list[tuple[str, bytes]] = []

    def write_bytes(self, frames: bytes) -> None:
        self.out.append(("now", bytes(frames)))

    def send_response(self, response: RemotingCommand) -> None:
        response.flag |= 1
        self.out.append(("queued", response.encode()))


def _serve(cls, data: bytes, start: int = 0, plain: bool = False):
    """(position, frames written, headers asked, served) of one ``serve``;
    the first answer is written at once, the others are queued."""
    support, channel = Support(plain), Channel()
    lane = cls(support, MAX)
    buf = memoryview(bytearray(data))
    pos, out = lane.serve(channel, buf, start, len(buf))
    assert out is None
    hows = [how for how, _ in channel.out]
    assert hows[:1] in ([], ["now"]) and set(hows[1:]) <= {"queued"}
    return pos, [frame for _, frame in channel.out], support.asked, lane.served()


def _pull(opaque: int, queue_id: int = 1, offset: int = 0, nums: int = 32,
          flag: int = 0x4, sub: str | None = "*", stype: int = 0, **extra) -> bytes:
    ext = pull_header("cg", "TopicA", queue_id, offset, nums, flag, 7, 15000, sub, 0, "TAG",
                      "broker-a")
    ext.update(extra)
    return RemotingCommand(RequestCode.PULL_MESSAGE, 0, 409, opaque, 0, None, ext, None,
                           stype).encode()


def _cpp_pull(opaque: int, queue_id: int = 2) -> bytes:
    """PULL_MESSAGE as the C++ client writes it: numbers unquoted for some
    fields, language CPP, remark "", credentials fields, a trailing newline."""
    ext = {"consumerGroup": "cg", "topic": "TopicA", "queueId": queue_id, "queueOffset": "5",
           "maxMsgNums": 32, "sysFlag": 6, "commitOffset": "0", "suspendTimeoutMillis": "20000",
           "subscription": "TagA || TagB", "subVersion": "0", "AccessKey": "",
           "OnsChannel": "ALIYUN", "Signature": "c2ln"}
    head = orjson.dumps({"code": 11, "extFields": ext, "flag": 0, "language": "CPP",
                         "opaque": opaque, "remark": "", "version": 63}) + b"\n"
    return _frame(head)


def _odd_pull(opaque: int) -> bytes:
    """Another key order, whitespace, null remark, extra extFields."""
    ext = orjson.dumps({"subVersion": "12", "topic": "TopicA", "consumerGroup": "cg",
                        "queueOffset": "-0", "queueId": "003", "maxMsgNums": "1",
                        "sysFlag": "1", "commitOffset": "99", "suspendTimeoutMillis": "0",
                        "x": True, "y": None, "z": 5})
    head = (b' {\n "version" : 409 ,"remark":null, "opaque":%d,"serializeTypeCurrentRPC":'
            b'"JSON", "extFields":' % opaque + ext + b', "code":11,"flag":0 }\t')
    return _frame(head)


# ---- what the general path reads ---------------------------------------------------------

def _general(frame: bytes):
    """(opaque, header fields) as the twin reads a frame (codec.decode and
    PullHeader.parse), or None."""
    got = read_pull(memoryview(frame)[4:])
    return None if got is None else (got[0], _fields(got[1]))


_value = st.one_of(
    st.text(max_size=12),
    st.text(alphabet="\x01\"\\/é\u2028ab0-", max_size=8),
    st.integers(-(2**62), 2**62).map(str),
    st.sampled_from(["0", "-0", "007", "+5", " 5", "5_0", "1e3", "9" * 19, "-" + "9" * 18]),
    st.integers(-(2**62), 2**62),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.just([1, {"x": None}]),
)


_INT_FIELDS = ("queueId", "queueOffset", "maxMsgNums", "sysFlag", "commitOffset",
               "suspendTimeoutMillis", "subVersion")
_TEXT = st.text(alphabet="abcXYZ_%-|* 019", min_size=1, max_size=10)
# subscriptions with tags past ASCII (two, three and four UTF-8 bytes)
_SUB = st.one_of(_TEXT, st.text(alphabet="ab|| é标签\u2028\U0001F600", min_size=1, max_size=10))
WIDE_SUBS = ["标签", "TagA || 标签", "é || \U0001F600"]
# malformed UTF-8 of the same length as "标签" (6 bytes): a cut sequence, a
# surrogate, an overlong form
BAD_UTF8 = [b"\xe6\xa0 \xe7\xad\xbe", b"\xed\xa0\x80\xe7\xad\xbe", b"\xc0\xaf\xe7\xad\xbe\x20"]


def _spoil(frame: bytes, bad: bytes) -> bytes:
    """``frame`` with its first "标签" replaced by malformed UTF-8 (same length)."""
    return frame.replace("标签".encode(), bad, 1)


@st.composite
def _header(draw) -> bytes:
    """A pull header: mostly well-formed (numbers as strings or integers),
    with a few fields dropped, replaced by odd values or added."""
    ext: dict = {"consumerGroup": draw(_TEXT), "topic": draw(_TEXT)}
    for k in _INT_FIELDS:
        n = draw(st.integers(-(2**40), 2**40))
        ext[k] = n if draw(st.booleans()) else str(n)
    if draw(st.booleans()):
        ext["subscription"] = draw(_SUB)
    if draw(st.booleans()):
        ext["expressionType"] = draw(_TEXT)
    for k in draw(st.lists(st.sampled_from(FIELDS), max_size=3, unique=True)):
        if draw(st.booleans()):
            ext.pop(k, None)
        else:
            ext[k] = draw(_value)
    for k in draw(st.lists(st.sampled_from(["AccessKey", "x", "é", "bname"]), max_size=3)):
        ext[k] = draw(_value)
    odd = draw(st.integers(0, 3)) == 0
    top = {"code": draw(st.sampled_from([11, 10, 310, "11", None])) if odd else 11,
           "extFields": ext,
           "flag": draw(st.sampled_from([0, 1, 2, None, "0"])) if odd else 0,
           "language": draw(st.sampled_from(["JAVA", "CPP", 7, None, True])),
           "opaque": draw(st.one_of(st.integers(-(2**31), 2**31 - 1), st.just(2**40))),
           "remark": draw(st.sampled_from([None, "", "r", 5])),
           "serializeTypeCurrentRPC": "JSON", "version": draw(st.sampled_from([409, 63, 1.5]))}
    for k in draw(st.lists(st.sampled_from(list(top)), max_size=2 if odd else 0, unique=True)):
        del top[k]
    items = list(top.items())
    draw(st.randoms()).shuffle(items)
    text = orjson.dumps(dict(items))
    if draw(st.booleans()):
        text = text.replace(b",", b" , ").replace(b":", b": ") + b"\n"
    if draw(st.integers(0, 4)) == 0:
        text = _spoil(text, draw(st.sampled_from(BAD_UTF8)))
    return text


@pytest.mark.skipif(_C is None, reason="the compiled pull lane is not built")
@settings(max_examples=2000, deadline=None)
@given(_header(), st.sampled_from([b"", b"", b"body"]), st.sampled_from([0, 0, 1]))
def test_compiled_lane_reads_what_the_general_reader_reads(header, body, stype):
    """Whatever header the compiled lane takes, the general reader reads the
    same opaque and the same pull fields from it (so the general path would
    run the same pull)."""
    frame = _frame(header, body, stype)
    pos, out, asked, _ = _serve(_C.PullLane, b"\0\0" + frame + b"tail", 2, plain=True)
    if asked:
        general = _general(frame)
        assert general is not None
        assert (general[1],) == tuple(asked)
        assert pos == 2 + len(frame) and len(out) == 1
        assert RemotingCommand.decode(out[0][4:]).opaque == general[0]
    else:
        assert pos == 2 and out == []


_BIN_TEXT = st.one_of(_TEXT, st.text(max_size=6), st.sampled_from(["", "\x7f", "é", "1\n"]))


@st.composite
def _rocketmq_header(draw) -> bytes:
    """A pull's ROCKETMQ binary header: the fields as texts, some empty
    (absent), odd, missing or repeated, extra keys, and now and then a
    length that points outside the header."""
    entries = [("consumerGroup", draw(_TEXT)), ("topic", draw(_TEXT))]
    entries += [(k, str(draw(st.integers(-(2**40), 2**40)))) for k in _INT_FIELDS]
    if draw(st.booleans()):
        entries.append(("subscription", draw(_SUB)))
    if draw(st.booleans()):
        entries.append(("expressionType", draw(_TEXT)))
    for k in draw(st.lists(st.sampled_from(FIELDS + ("AccessKey", "é", "")), max_size=3)):
        entries.append((k, draw(_BIN_TEXT) if draw(st.booleans()) else
                        draw(st.sampled_from(["", "007", "-0", "+5", "9" * 19]))))
    draw(st.randoms()).shuffle(entries)
    ext = b"".join(struct.pack(">h", len(k.encode())) + k.encode()
                   + struct.pack(">i", len(v.encode())) + v.encode() for k, v in entries)
    remark = draw(st.sampled_from([b"", b"r", "é".encode(), b"\xff"]))
    code = draw(st.sampled_from([11, 11, 11, 10, -1]))
    flag = draw(st.sampled_from([0, 0, 0, 1, 2]))
    head = struct.pack(">hBhiii", code, draw(st.sampled_from([0, 1, 99])), 409,
                       draw(st.integers(-(2**31), 2**31 - 1)), flag, len(remark)) + remark \
        + struct.pack(">i", len(ext)) + ext
    if draw(st.integers(0, 9)) == 0:  # a length out of bounds somewhere
        at = draw(st.integers(0, len(head) - 1))
        head = head[:at] + bytes([draw(st.integers(0, 255))]) + head[at + 1:]
    if draw(st.integers(0, 4)) == 0:
        head = _spoil(head, draw(st.sampled_from(BAD_UTF8)))
    return head


@pytest.mark.skipif(_C is None, reason="the compiled pull lane is not built")
@settings(max_examples=1500, deadline=None)
@given(_rocketmq_header(), st.sampled_from([b"", b"", b"body"]))
def test_compiled_lane_reads_rocketmq_headers_as_the_general_reader(header, body):
    frame = _frame(header, body, 1)
    pos, out, asked, _ = _serve(_C.PullLane, b"\0\0" + frame + b"tail", 2, plain=True)
    if asked:
        general = _general(frame)
        assert general is not None
        assert (general[1],) == tuple(asked)
        assert pos == 2 + len(frame) and len(out) == 1
        assert out[0][4] == 1  # answered in the request's serialization
        assert RemotingCommand.decode(out[0][4:]).opaque == general[0]
    else:
        assert pos == 2 and out == []


@pytest.mark.parametrize("cls", LANES)
def test_lanes_take_the_usual_spellings_and_answer_alike(cls):
    frames = [_pull(1), _cpp_pull(2), _odd_pull(3), _pull(4, queue_id=3, offset=2**40, nums=1,
                                                         flag=0x5, sub=None),
              _pull(5, queue_id=2, stype=1), _pull(6, stype=1)]
    data = b"".join(frames)
    pos, out, asked, served = _serve(cls, data)
    assert pos == len(data) and len(out) == 6 and served == [(11, False, 6)]
    assert asked == [_general(f)[1] for f in frames]
    # every answer is the general encoder's response for the same values
    for frame, answer, fields in zip(frames, out, asked, strict=True):
        h = dict(zip(FIELDS, fields, strict=True))
        resp = RemotingCommand.decode(answer[4:])
        n = max(1, min(h["maxMsgNums"], 4))
        body = b"".join(bytes(range(i, i + 50 + i)) for i in range(n))
        ext = {"suggestWhichBrokerId": str(h["queueId"] % 3),
               "nextBeginOffset": str(h["queueOffset"] + n), "minOffset": "0",
               "maxOffset": str(h["queueOffset"] + 40)}
        want = RemotingCommand(0, 0, 409, _general(frame)[0], 1, "FOUND", ext, [body],
                               frame[4])  # in the request's serialization
        assert answer == want.encode() and resp.body == body


@pytest.mark.parametrize("cls", LANES)
def test_lanes_take_subscriptions_past_ascii(cls):
    """Tags past ASCII, in either serialization, are taken and handed on as
    the general reader decodes them; malformed UTF-8 is left to the general
    path (whose decoder refuses the frame)."""
    frames = [_pull(i, sub=sub, stype=stype)
              for i, (sub, stype) in enumerate([(s, t) for s in WIDE_SUBS for t in (0, 1)])]
    data = b"".join(frames)
    pos, out, asked, served = _serve(cls, data)
    assert pos == len(data) and len(out) == 6 and served == [(11, False, 6)]
    assert asked == [_general(f)[1] for f in frames]
    at = FIELDS.index("subscription")
    assert [a[at] for a in asked] == [s for s in WIDE_SUBS for _ in (0, 1)]
    assert [f[4] for f in out] == [0, 1] * 3  # answered in the request's serialization
    for stype in (0, 1):
        for bad in BAD_UTF8:
            frame = _spoil(_pull(9, sub="TagA || 标签", stype=stype), bad)
            assert _general(frame) is None
            assert _serve(cls, frames[0] + frame)[:2] == (len(frames[0]), out[:1]), (stype, bad)


@pytest.mark.skipif(_C is None, reason="the compiled pull lane is not built")
def test_compiled_lane_and_twin_write_the_same_bytes():
    frames = b"".join(_pull(i, queue_id=i % 4, offset=i * 32, nums=1 + i % 40, stype=i % 3 // 2,
                            sub=WIDE_SUBS[i % 4] if i % 4 < 3 else "*")
                      for i in range(50))
    twin, fast = _serve(PullLane, frames), _serve(_C.PullLane, frames)
    assert twin == fast and twin[0] == len(frames) and len(twin[1]) == 50


@pytest.mark.parametrize("cls", LANES)
def test_what_the_lane_leaves_to_the_general_path(cls):
    ok = _pull(1)
    refused = [
        _pull(2, queue_id=99),  # the support declines (not found, a check fails, ...)
        _pull(2, queue_id=97),  # caught up: nothing to find
        RemotingCommand(RequestCode.SEND_MESSAGE_V2, 0, 409, 3, 0, None, {"a": "b"}, b"x",
                        0).encode(),
        RemotingCommand(RequestCode.PULL_MESSAGE, 0, 409, 4, 1, None,
                        pull_header("cg", "T", 0, 0, 32, 4, 0, 0, "*", 0, "TAG", "b"), None,
                        0).encode(),  # a response
        RemotingCommand(RequestCode.PULL_MESSAGE, 0, 409, 5, 2, None,
                        pull_header("cg", "T", 0, 0, 32, 4, 0, 0, "*", 0, "TAG", "b"), None,
                        0).encode(),  # oneway
        _pull(6, stype=1)[:4] + b"\x02" + _pull(6, stype=1)[5:],  # an unknown serialization
        RemotingCommand(RequestCode.PULL_MESSAGE, 0, 409, 7, 0, None,
                        pull_header("cg", "T", 0, 0, 32, 4, 0, 0, "*", 0, "TAG", "b"), b"x",
                        0).encode(),  # a body
        RemotingCommand(RequestCode.PULL_MESSAGE, 0, 409, 8, 0, None,
                        {"consumerGroup": "cg", "topic": "T"}, None, 0).encode(),  # fields missing
        ok[:-3],  # incomplete
    ]
    for frame in refused:
        data = ok + frame + ok
        pos, out, _asked, served = _serve(cls, data)
        assert pos == len(ok) and len(out) == 1 and served == [(11, False, 1)], frame
    assert _serve(cls, refused[0])[:2] == (0, [])


@settings(max_examples=300, deadline=None)
@given(int64, int64, int64, int64, st.integers(-(2**31), 2**31 - 1), st.integers(0, 2**30))
def test_found_header_is_the_general_encoders(suggest, next_begin, min_offset, max_offset,
                                              opaque, body_len):
    head = FoundHeader()
    assert head.ok
    ext = {"suggestWhichBrokerId": str(suggest), "nextBeginOffset": str(next_begin),
           "minOffset": str(min_offset), "maxOffset": str(max_offset)}
    assert head.render(suggest, next_begin, min_offset, max_offset, opaque, body_len) == \
        codec.encode(0, 0, 409, opaque, 1, "FOUND", ext, 0, body_len)


class _Fixed:
    def __init__(self, pos: int, out: bytes | None, served: list) -> None:
        self.result = (pos, out)
        self._served = served
        self.calls = 0

    def serve(self, channel, buf, pos, end):
        self.calls += 1
        return self.result if self.result[0] is not None else (pos, None)

    def served(self):
        return self._served


@pytest.mark.parametrize("cls", JOINED)
def test_lanes_offer_a_read_to_each_lane_in_turn(cls):
    """The twin and the compiled ``Lanes`` alike: the first lane's answer that
    took anything, the next lanes not asked, ``served`` of the lane that took."""
    idle, sends, pulls = _Fixed(None, None, []), _Fixed(9, b"ok", [(310, False, 2)]), \
        _Fixed(7, None, [(11, False, 1)])
    lanes = cls(idle, pulls)
    assert lanes.lanes == (idle, pulls)
    assert lanes.serve(None, b"", 0, 20) == (7, None) and lanes.served() == [(11, False, 1)]
    lanes = cls(sends, pulls)
    assert lanes.serve(None, b"", 0, 20) == (9, b"ok") and pulls.calls == 1
    assert lanes.served() == [(310, False, 2)]
    assert cls(idle, idle).serve(None, b"", 3, 20) == (3, None)
    answers = _Fixed(5, b"x", [(310, True, 1)])  # an answer without taking a frame
    assert cls(idle, answers).serve(None, b"", 5, 20) == (5, b"x")


def test_join_lanes_keeps_each_lane_once_in_order():
    """``join_lanes`` makes the built ``Lanes`` (the twin under
    RMQ_NO_EXTENSIONS) and unpacks one it made, or a twin, given to it."""
    idle, pulls, pops = _Fixed(None, None, []), _Fixed(7, None, []), _Fixed(8, None, [])
    assert join_lanes(None, None) is None
    assert join_lanes(None, pulls) is pulls
    lanes = join_lanes(idle, pulls)
    assert type(lanes) in JOINED and lanes.lanes == (idle, pulls)
    joined = join_lanes(lanes, pops)
    assert type(joined) is type(lanes) and joined.lanes == (idle, pulls, pops)
    assert join_lanes(Lanes(idle, pulls), pops).lanes == (idle, pulls, pops)  # the twin's too


@pytest.mark.parametrize("cls", LANES)
def test_a_pull_that_fails_after_the_read_is_answered_system_error(cls):
    data = _pull(1) + _pull(2, queue_id=98) + _pull(3)
    pos, out, asked, served = _serve(cls, data)
    assert pos == len(data) and len(asked) == 3 and served == [(11, False, 3)]
    codes = [(RemotingCommand.decode(f[4:]).code, RemotingCommand.decode(f[4:]).opaque)
             for f in out]
    assert codes == [(0, 1), (1, 2), (0, 3)]
    assert RemotingCommand.decode(out[1][4:]).remark.startswith("KeyError: 'boom'")


@pytest.mark.skipif(_C is None, reason="the compiled pull lane is not built")
@settings(max_examples=800, deadline=None)
@given(st.one_of(_rocketmq_header().map(lambda h: _frame(h, b"", 1)), _header().map(_frame)),
       st.randoms())
def test_compiled_pull_head_reads_what_the_twin_reads(frame, rnd):
    """``pull_head`` (the fuzz target's view): the compiled reading of a frame,
    mutated now and then, equals the twin's wherever the compiled one takes it."""
    data = bytearray(frame)
    for _ in range(rnd.choice([0, 0, 1, 3])):
        data[rnd.randrange(len(data))] = rnd.randrange(256)
    got = _C.pull_head(data, 0, len(data), MAX, PullHeader.make)
    if got is not None:
        twin = pull_head(data, 0, len(data), MAX)
        assert (got[0], got[1], _fields(got[2])) == (twin[0], twin[1], _fields(twin[2]))
