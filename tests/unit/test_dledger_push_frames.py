"""A leader's APPEND pushes written and answered as raw frames
(rmq/dledger/rpc.py ``PeerClient.push``, compiled twin
rmq._fast.dledger_frames): the frame is the general client's frame of the
same request byte for byte; an answer frame is taken only in the plain
header form and then read as the general decoder reads it; a push ends
exactly once -- answered, timed out, its connection closed -- as a general
request does."""

from __future__ import annotations

import asyncio
import random
import struct
from collections import deque
from types import SimpleNamespace

import pytest

from rmq._fast import compiled_or_none
from rmq.dledger import mmap_store as mmap_store_mod
from rmq.dledger import pusher as pusher_mod
from rmq.dledger import rpc
from rmq.dledger.entry import Entry
from rmq.dledger.member_state import Role
from rmq.dledger.messages import _names, push_answer, push_answer_bytes, push_append_body
from rmq.dledger.protocol import Code, PushType, RequestCode
from rmq.remoting import RemotingCommand, codec
from rmq.remoting.abstract import FrameWait
from rmq.remoting.command import RPC_RESPONSE

pytestmark = pytest.mark.timeout(60)
C = compiled_or_none("dledger_frames")
P = compiled_or_none("dledger_push")
PUSHERS = [rpc.py_push_frame] + ([C.push_frame] if C is not None else [])
ENTRY_PUSHERS = [rpc.py_push_entries_frame] + ([P.encode_push_frame] if P is not None else [])
READERS = [rpc.py_answer_at] + ([C.answer_at] if C is not None else [])
MAX = 16 * 1024 * 1024
ANSWER = push_answer_bytes("g", 200, 3, 0, 7, 5, 1)


def _general_push(opaque: int, body: bytes) -> bytes:
    request = RemotingCommand.create_request(RequestCode.PUSH, None, body)
    request.opaque = opaque
    head = codec.py_encode(request.code, request.language, request.version, opaque,
                           request.flag, None, None, 0, len(body))
    assert request.encode() == head + body  # the compiled codec, when built, writes the same
    return head + body


@pytest.mark.parametrize("write", PUSHERS)
def test_push_frame_is_the_general_clients_frame(write):
    for opaque in (0, 1, 9, 10, 99, 12345, 2**31 - 1, -1, -2**31):
        for body in (b"", b"{}", ANSWER, bytes(range(256)) * 300):
            assert write(rpc.PUSH_HEAD, opaque, rpc.PUSH_TAIL, body) == \
                _general_push(opaque, body), (opaque, len(body))


def _entries(n: int, first: int) -> list[Entry]:
    rnd = random.Random(first * 31 + n)
    return [Entry(first + i, 3, rnd.randbytes(rnd.choice([0, 1, 2, 3, 100, 1200])), 4096 * i,
                  channel=i % 2, chain_crc=-i, body_crc=2**31 - 1 - i) for i in range(n)]


@pytest.mark.parametrize("write", ENTRY_PUSHERS)
def test_a_push_of_entries_is_the_general_clients_frame_of_its_body(write):
    """The frame written from the entries in one call is the general client's
    frame of ``push_append_body``'s bytes, for single entries and batches,
    entries whose JSON is made here or was kept from an earlier push."""
    for n, batch in ((1, False), (1, True), (3, True), (40, True), (3, False)):
        for ids in (("g", "n0", "n1", "n0"), ('g"\u00e9', None, "n1", None)):
            for opaque, term, commit in ((0, 5, -1), (12345, 7, 0), (2**31 - 1, 2**40, 2**33)):
                for _kept in range(2):
                    entries = _entries(n, 9 + n)
                    got = write(rpc.PUSH_HEAD, opaque, rpc.PUSH_TAIL, *_names(*ids), term,
                                commit, entries, batch)
                    body = push_append_body(*ids, term, commit, _entries(n, 9 + n), batch)
                    assert got == _general_push(opaque, body), (n, batch, ids, opaque)
    with pytest.raises(IndexError):
        write(rpc.PUSH_HEAD, 1, rpc.PUSH_TAIL, b'"g"', b"", 1, 1, [], True)


class _PlainEntry(Entry):
    """An ``Entry`` with a ``__dict__`` (no slots of its own): the compiled
    push reads its fields through its attributes."""


@pytest.mark.parametrize("write", ENTRY_PUSHERS)
def test_a_push_reads_entries_from_slots_or_attributes_alike(write):
    """``Entry``s (the compiled push reads their fields from their slots),
    entries of another class (through their attributes) and both in one push:
    the same frame."""
    for kinds in ((Entry,), (_PlainEntry,), (Entry, _PlainEntry), (_PlainEntry, Entry)):
        for kept in range(2):
            entries = [kinds[i % len(kinds)](e.index, e.term, e.body, e.pos, channel=e.channel,
                                             chain_crc=e.chain_crc, body_crc=e.body_crc)
                       for i, e in enumerate(_entries(7, 30))]
            if kept:
                for e in entries:
                    e.compute_size()
            for batch in (True, False):
                got = write(rpc.PUSH_HEAD, 77, rpc.PUSH_TAIL, *_names("g", "n0", "n1", "n0"), 5,
                            3, entries, batch)
                body = push_append_body("g", "n0", "n1", "n0", 5, 3, _entries(7, 30), batch)
                assert got == _general_push(77, body), (kinds, kept, batch)


def _answer(opaque: int, body: bytes | None, code: int = 200, remark: str | None = None,
            ext: dict | None = None, stype: int = 0, flag: int = RPC_RESPONSE) -> bytes:
    head = codec.py_encode(code, 0, 409, opaque, flag, remark, ext, stype, len(body or b""))
    return head + (body or b"")


def _java(opaque: int, body: bytes, flag: int = 1, lang: str = "JAVA",
          stype_word: bool = True) -> bytes:
    """0.3.1.2's answer header (fastjson's order; the type word optional)."""
    typ = ',"serializeTypeCurrentRPC":"JSON"' if stype_word else ""
    header = (f'{{"code":200,"flag":{flag},"language":"{lang}","opaque":{opaque}{typ},'
              f'"version":409}}').encode()
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


def _frames() -> list[tuple[bytes, bool]]:
    """(frame bytes, whether the lane must take it)."""
    return [
        (_answer(5, ANSWER), True),
        (_answer(2**31 - 1, ANSWER), True),
        (_answer(6, None), True),
        (_answer(7, ANSWER, code=1), True),
        (_java(8, ANSWER), True),
        (_java(9, ANSWER, stype_word=False), True),
        (_java(10, ANSWER, lang="CPP"), True),
        (_java(11, ANSWER, flag=3), True),
        (_answer(12, ANSWER, remark="busy"), False),
        (_answer(13, ANSWER, ext={"a": "b"}), False),
        (_answer(14, ANSWER, stype=1), False),
        (_answer(15, ANSWER, flag=0), False),
        (_java(16, ANSWER, flag=0), False),
        (_java(17, ANSWER, lang="java"), False),
        (_answer(-3, ANSWER), True),
        (_java(21, ANSWER).replace(b'"flag":1', b'"flag":1.0'), False),
        (_java(0, ANSWER).replace(b'"opaque":0', b'"opaque":-0'), False),
        (_java(18, ANSWER).replace(b'"opaque":18', b'"opaque":018'), False),
        (_java(19, ANSWER).replace(b'"opaque":19', b'"opaque": 19'), False),
        (_java(20, ANSWER).replace(b'"opaque":20', b'"opaque":99999999999'), False),
    ]


def _general(buf: bytes, pos: int, end: int) -> tuple | None:
    """(opaque, body, frame end) of the first frame by the general decoder,
    None when it refuses it or it is not whole; 'request' for a request."""
    frames, next_pos, error = codec.py_decode_frames(memoryview(buf), pos, end, MAX)
    if not frames:
        return None
    code, language, version, opaque, flag, remark, ext, body, stype = frames[0]
    if not flag & RPC_RESPONSE:
        return "request"
    length = struct.unpack_from(">i", buf, pos)[0]
    return opaque, body, pos + 4 + length


def _agree(read, buf: bytes, pos: int = 0, end: int | None = None) -> bool:
    end = len(buf) if end is None else end
    got = read(memoryview(buf), pos, end, MAX)
    if got is None:
        return False
    general = _general(buf, pos, end)
    assert general is not None and general != "request", buf
    opaque, body_at, frame_end = got
    assert (opaque, buf[body_at:frame_end] or None, frame_end) == general, buf
    return True


@pytest.mark.parametrize("read", READERS)
def test_answer_frames_read_as_the_general_decoder_reads_them(read):
    for frame, taken in _frames():
        assert _agree(read, frame) == taken, frame
        assert read(memoryview(frame), 0, len(frame) - 1, MAX) is None  # not whole yet
        two = frame + _answer(77, ANSWER)
        assert _agree(read, two, len(frame)), frame  # the second of two
        assert _agree(read, two) == taken
    frame = _answer(5, ANSWER)
    assert read(memoryview(frame), 0, len(frame), len(frame) - 5) is None  # over max_frame


@pytest.mark.parametrize("read", READERS)
def test_broken_answer_frames_never_crash_and_agree(read):
    random.seed(11)
    frames = [f for f, taken in _frames() if taken]
    taken = 0
    for _ in range(3000):
        frame = bytearray(random.choice(frames))
        for _ in range(random.randint(1, 3)):
            frame[random.randrange(len(frame))] = random.randrange(256)
        frame = bytes(frame)
        taken += _agree(read, frame)  # (taken: the general decoder reads the same)
        if C is not None:
            assert C.answer_at(memoryview(frame), 0, len(frame), MAX) == \
                rpc.py_answer_at(memoryview(frame), 0, len(frame), MAX), frame
    assert taken > 500


# ---- the client against a scripted peer ---------------------------------------------


class Peer:
    """A follower's remoting server that records each request frame and
    answers as told: 'plain' (rmq's header), 'remark' (a header the lane
    leaves to the general decoder), 'none' (no answer), 'close'."""

    def __init__(self) -> None:
        self.mode = "plain"
        self.frames: list[bytes] = []
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.AbstractServer | None = None
        self.addr = ""

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.addr = f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        try:
            while True:
                (length,) = struct.unpack(">i", await reader.readexactly(4))
                frame = await reader.readexactly(length)
                self.frames.append(struct.pack(">i", length) + frame)
                opaque = codec.py_decode(frame)[3]
                if self.mode == "plain":
                    writer.write(_answer(opaque, ANSWER))
                elif self.mode == "remark":
                    writer.write(_answer(opaque, ANSWER, remark="r"))
                elif self.mode == "close":
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # (the connection or the server closed)

    async def stop(self) -> None:
        for w in self.writers:
            w.close()
        self.server.close()
        await self.server.wait_closed()


def _read(done) -> FrameWait:
    """A push's wait: the answer's body read as the pusher reads it."""
    return FrameWait(lambda body: done(None if body is None else push_answer(body)))


class _Seen(FrameWait):
    """A push's wait that tells whether the general path answered it."""

    __slots__ = ("general",)

    def __init__(self, callback) -> None:
        super().__init__(callback)
        self.general = False

    def set_result(self, response) -> None:
        self.general = True
        super().set_result(response)


def _push_raw(peer_rpc: rpc.PeerRpc, body: bytes, done, more: bool = False,
              timeout_ms: int = 3000) -> None:
    peer_rpc.client.push(peer_rpc.peer_map["n1"], body, timeout_ms, _read(done), more)


async def _push(peer_rpc: rpc.PeerRpc, body: bytes, timeout_ms: int = 3000,
                wait: float = 5.0) -> list:
    got: list = []
    _push_raw(peer_rpc, body, got.append, timeout_ms=timeout_ms)
    for _ in range(int(wait / 0.01)):
        if got:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)  # and only once
    return got


@pytest.mark.asyncio
async def test_a_push_to_a_peer_is_answered_and_fails_as_a_general_request():
    peer = Peer()
    await peer.start()
    peer_rpc = rpc.PeerRpc({"n1": peer.addr})
    client = peer_rpc.client
    try:
        expected = [push_answer(ANSWER)]
        assert await _push(peer_rpc, b'{"a":1}') == expected  # connects: the general way
        assert await _push(peer_rpc, b'{"a":2}') == expected  # the raw frame, the lane
        assert client.lane is not None and not client._responses
        sent = peer.frames[-1]
        opaque = codec.py_decode(sent[4:])[3]
        assert sent == _general_push(opaque, b'{"a":2}')
        peer.mode = "remark"  # another header form: the general decoder finds the push
        assert await _push(peer_rpc, b'{"a":3}') == expected and not client._responses
        peer.mode = "plain"
        # pushes in one turn go out together and are all answered
        got: list = []
        for i in range(5):
            _push_raw(peer_rpc, b'{"n":%d}' % i, got.append, more=i < 4)
        for _ in range(500):
            if len(got) == 5:
                break
            await asyncio.sleep(0.01)
        assert got == expected * 5 and not client._responses
        peer.mode = "none"  # no answer: None once the timeout passes
        assert await _push(peer_rpc, b'{"a":4}', timeout_ms=200) == [None]
        assert not client._responses
        peer.mode = "close"  # the connection closed: None at once
        assert await _push(peer_rpc, b'{"a":5}', wait=2.0) == [None]
        assert not client._responses
        peer.mode = "plain"  # connects again
        assert await _push(peer_rpc, b'{"a":6}') == expected
    finally:
        await peer_rpc.close()
        await peer.stop()


@pytest.mark.asyncio
async def test_pushes_and_general_requests_share_a_connection():
    """Answers to pushes and to other requests in one read, in either order:
    each reaches its own caller."""
    peer = Peer()
    await peer.start()
    peer_rpc = rpc.PeerRpc({"n1": peer.addr})
    try:
        for _ in range(2):  # (the second as a raw frame, answered through the lane)
            assert await _push(peer_rpc, b"{}") == [push_answer(ANSWER)]
        peer.mode = "none"
        got: list = []
        _push_raw(peer_rpc, b'{"p":1}', got.append)
        general = asyncio.ensure_future(peer_rpc.client.invoke(
            peer.addr, RemotingCommand.create_request(RequestCode.METADATA, None, b"{}"), 3000))
        _push_raw(peer_rpc, b'{"p":2}', got.append)
        for _ in range(300):
            if len(peer.frames) == 5:
                break
            await asyncio.sleep(0.01)
        heads = [codec.py_decode(f[4:]) for f in peer.frames[2:]]
        meta = next(h[3] for h in heads if h[0] == RequestCode.METADATA)
        pushes = [h[3] for h in heads if h[0] == RequestCode.PUSH]
        w = peer.writers[-1]
        w.write(_answer(pushes[0], ANSWER) + _answer(meta, b'{"code":200}')
                + _answer(pushes[1], ANSWER))
        response = await asyncio.wait_for(general, 5)
        assert response.body == b'{"code":200}'
        for _ in range(300):
            if len(got) == 2:
                break
            await asyncio.sleep(0.01)
        assert got == [push_answer(ANSWER)] * 2 and not peer_rpc.client._responses
    finally:
        await peer_rpc.close()
        await peer.stop()


@pytest.mark.asyncio
async def test_pushes_of_entries_go_as_raw_frames_once_connected():
    """``push_entries``: the general way while not connected, then the
    frame written from the entries; the follower gets the same bytes
    either way, and each push is answered once."""
    peer = Peer()
    await peer.start()
    peer_rpc = rpc.PeerRpc({"n1": peer.addr})
    client = peer_rpc.client
    names = _names("g", "n0", "n1", "n0")
    try:
        for connected in range(2):
            got: list = []
            entries = _entries(3, 20)
            wait = _Seen(lambda body, got=got: got.append(push_answer(body)))
            client.push_entries(peer.addr, names, 4, 19, entries, True, 3000, wait)
            for _ in range(500):
                if got:
                    break
                await asyncio.sleep(0.01)
            assert got == [push_answer(ANSWER)] and not client._responses
            sent = peer.frames[-1]
            opaque = codec.py_decode(sent[4:])[3]
            assert sent == _general_push(
                opaque, push_append_body("g", "n0", "n1", "n0", 4, 19, _entries(3, 20), True))
            # (the first went the general way: not connected yet); once
            # connected, the answer is read by the lane, not the response path
            assert not (connected and wait.general)
    finally:
        await peer_rpc.close()
        await peer.stop()


LANES = [rpc.PyPushAnswers] + ([C.PushAnswers] if C is not None else [])


class _Told(FrameWait):
    """A raw-frame wait that keeps what it is told."""

    def __init__(self, told: list, key: int) -> None:
        super().__init__(None)
        self.told_to = told
        self.key = key

    def tell(self, body) -> None:
        self.told = True
        self.told_to.append((self.key, bytes(body)))


@pytest.mark.parametrize("lane_type", LANES)
def test_the_answers_lane_tells_the_leading_answers_and_stops_as_its_twin(lane_type):
    """A read of answers: each leading plain answer of a raw-frame request
    in the table is told its body and leaves the table; the lane stops at
    the first frame that is not one (another header form, a request the
    table holds as a future, an unknown opaque, a frame not whole), where
    the general way goes on; the compiled lane and its twin alike."""
    for stop in ("form", "future", "unknown", "partial", None):
        told: list = []
        responses: dict = {}
        buf = bytearray()
        for n in range(4):  # answers without a body and with one
            responses[100 + n] = (_Told(told, 100 + n), 0)
            buf += _answer(100 + n, ANSWER if n % 2 else None)
        lead = len(buf)
        if stop == "form":
            buf += _answer(200, ANSWER, remark="busy")
            responses[200] = (_Told(told, 200), 0)
        elif stop == "future":
            buf += _answer(201, ANSWER)
            responses[201] = (object(), 0)
        elif stop == "unknown":
            buf += _answer(202, ANSWER)
        elif stop == "partial":
            buf += _answer(203, ANSWER)[:-3]
            responses[203] = (_Told(told, 203), 0)
        if stop != "partial":  # (a frame not whole is the read's last)
            buf += _answer(104, ANSWER)  # after the stop: left to the general way
            responses[104] = (_Told(told, 104), 0)
        lane = lane_type(responses, MAX, FrameWait)
        pos, out = lane.serve(None, memoryview(buf), 0, len(buf))
        assert out is None and lane.served() == []
        body = bytes(_answer(0, ANSWER)[-len(ANSWER):])
        if stop is None:
            assert pos == len(buf) and responses == {}
            assert [k for k, _ in told] == [100, 101, 102, 103, 104]
        else:
            assert pos == lead and [k for k, _ in told] == [100, 101, 102, 103]
            assert 100 not in responses and (stop == "partial" or 104 in responses)
        assert [b for _, b in told[:4]] == [b"", body, b"", body]


class _Wake:
    __slots__ = ("sets",)

    def __init__(self) -> None:
        self.sets = 0

    def set(self) -> None:
        self.sets += 1


class _PusherFields:
    """What an ``_Acked`` answer reaches of an ``EntryPusher``, recorded."""

    def __init__(self, role, term: int, end: int, push_soon: bool) -> None:
        self.water_marks = {term: {"n1": 3, "n2": 5}}
        self.ms = SimpleNamespace(role=role, curr_term=term)
        self.store = SimpleNamespace(ledger_end_index=end)
        self._push_soon = push_soon  # a push round is due
        self.checks: list = []

    update_water_mark = pusher_mod.EntryPusher.update_water_mark  # (the twin's)

    def _marks(self, term: int) -> dict:
        marks = self.water_marks[term] = {"n1": -1, "n2": -1}
        return marks

    def _check_quorum(self, marks: dict) -> None:
        self.checks.append(dict(marks))


class _SlottedPusher(_PusherFields):
    __slots__ = ("water_marks", "ms", "store", "_push_soon")  # (its base's __dict__ kept for the rest)


class _DispatcherFields:
    """What an ``_Acked`` answer reaches of a ``PeerDispatcher``, recorded."""

    def __init__(self, pusher, write_index: int) -> None:
        self.pusher = pusher
        self.peer = "n1"
        self.pending = {7: 1.0, 8: 2.0}
        self.write_index = write_index
        self.wake = _Wake()
        self.state = PushType.APPEND
        self.changes: list = []

    def _change(self, index: int, target: str) -> None:
        self.changes.append((index, target))


class _SlottedDispatcher(_DispatcherFields):
    __slots__ = ("pusher", "peer", "pending", "write_index", "wake")  # (as above)


def _acked_answers() -> list[bytes]:
    """A follower's answers of every kind: successes with and without an
    index, of this term and of another, one that moves no mark, a failure,
    one only the general reader reads, one it refuses."""
    return [push_answer_bytes("g", 200, 3, 0, 9, 7, 1),
            push_answer_bytes("g", 200, 3, 0, 9, None, 1),
            push_answer_bytes("g", 200, 4, 0, 9, 8, 1),
            push_answer_bytes("g", 200, 3, 0, 9, 1, 1),
            push_answer_bytes("g", Code.INCONSISTENT_STATE, 3, 0, 9, 7, 1),
            b'{"code": 200, "term": 3, "index": 8}',
            b'{"code":200,"term":3,"index":',
            push_answer_bytes("g", 200, 3, 0, 9, 7, 1)]


def _tell_acked(lane_type, pusher_type, dispatcher_type, role, count: int,
                push_soon: bool) -> tuple:
    pusher = pusher_type(role, 3, 20, push_soon)
    d = dispatcher_type(pusher, 12)
    responses, buf = {}, bytearray()
    waits = []
    for n, body in enumerate(_acked_answers()):
        waits.append(pusher_mod._Acked(d, count))
        responses[300 + n] = (waits[-1], 0)
        buf += _answer(300 + n, body)
    pos, _ = lane_type(responses, MAX, FrameWait).serve(None, memoryview(buf), 0, len(buf))
    return (pos, responses, [w.told for w in waits], pusher.water_marks, pusher.checks,
            d.pending, d.wake.sets, d.changes)


@pytest.mark.parametrize("role", [Role.LEADER, Role.FOLLOWER])
@pytest.mark.parametrize("count", [1, 3])
@pytest.mark.parametrize("push_soon", [False, True])
def test_push_answers_tell_their_waits_as_the_twin_from_slots_or_attributes(role, count,
                                                                            push_soon):
    """An ``_Acked`` wait's answers (``dledger_frames.tell_acked`` in the
    compiled lane, ``_Acked.tell`` in the twin): the same water marks,
    quorum checks, pending pushes, wake-ups and state changes, whether the
    dispatcher's and pusher's fields are read at their slots or through
    their attributes.  A success with entries not pushed yet wakes the
    dispatcher only when no push round is due (``push_soon``: that round
    pushes them)."""
    got = {}
    for lane_type in LANES:
        for pusher_type, dispatcher_type in ((_PusherFields, _DispatcherFields),
                                             (_SlottedPusher, _SlottedDispatcher),
                                             (_PusherFields, _SlottedDispatcher)):
            got[(lane_type, pusher_type, dispatcher_type)] = _tell_acked(
                lane_type, pusher_type, dispatcher_type, role, count, push_soon)
    first = next(iter(got.values()))
    assert all(v == first for v in got.values())
    pos, responses, told, marks, checks, pending, wakes, changes = first
    assert responses == {} and told == [True] * 8
    assert marks[3]["n1"] == 8 + count - 1 and marks[4]["n1"] == 8 + count - 1
    assert bool(checks) == (role is Role.LEADER) and pending == {}
    assert changes == [(-1, PushType.COMPARE)] and wakes == 1 + (0 if push_soon else 6)


class _QuorumFields:
    """What ``_check_quorum`` reaches of an ``EntryPusher``, recorded."""

    def __init__(self, marks: dict, end: int, committed: int, term: int, groups) -> None:
        self.water_marks = {term: marks}
        self.ms = SimpleNamespace(curr_term=term, self_id="n0")
        self.store = SimpleNamespace(ledger_end_index=end, committed_index=committed,
                                     update_committed_index=self._commit)
        self.waiters = deque(groups)
        self._open = groups[-1] if groups else None
        self.commit_listeners = [self._told]
        self.log: list = []

    def _marks(self, term: int) -> dict:
        self.log.append(("marks", term))
        return self.water_marks.setdefault(term, {"n0": -1, "n1": -1, "n2": -1})

    def _commit(self, term: int, index: int) -> None:
        self.log.append(("commit", term, index))
        self.store.committed_index = min(index, self.store.ledger_end_index)

    def _told(self, index: int) -> None:
        self.log.append(("listener", index))


class _SlottedQuorum(_QuorumFields):
    __slots__ = ("ms", "store", "waiters", "_open", "commit_listeners")  # (as above)


def _quorum_case(check, pusher_type, marks, end, committed, own) -> tuple:
    settled: list = []
    told: list = []
    groups = []

    def failing(_value) -> None:
        raise RuntimeError("a waiter's bug")

    for last, term in ((3, 1), (5, 2), (8, 2), (12, 2)):
        g = pusher_mod.AckGroup(Entry(index=last, term=term), last - 1, 0.0,
                                lambda code, last=last: settled.append((last, code)) or last)
        if last != 8:  # (waiters told by callbacks, one failing; one group with none)
            g.then = [failing, lambda value, last=last: told.append((last, value))]
        groups.append(g)
    groups[1].settled = True  # (already settled: settled again, nothing happens)
    pusher = pusher_type(dict(marks), end, committed, 2, groups)
    check(pusher, pusher.water_marks[2] if own else None)
    return (pusher.water_marks, pusher.store.committed_index, [g.last for g in pusher.waiters],
            pusher._open is None, settled, told, [g.settled for g in groups], pusher.log)


CHECKS = [pusher_mod._check_quorum, getattr(C, "check_quorum", None)]


@pytest.mark.compiled_only
@pytest.mark.parametrize("own", [True, False])
@pytest.mark.parametrize("case", [({"n0": 4, "n1": 9, "n2": 2}, 10, 1),
                                  ({"n0": 12, "n1": 12, "n2": 12}, 12, 3),
                                  ({"n0": 1, "n1": -1, "n2": -1}, 1, 1),
                                  ({"n0": 20, "n1": 2 ** 70, "n2": 6}, 20, -1),
                                  ({"n0": 8, "n1": 7}, 8, 2)])
def test_check_quorum_compiled_and_twin_commit_and_settle_alike(case, own):
    """``EntryPusher._check_quorum`` compiled and its twin: the same marks,
    commit, groups settled (an older term's with TERM_CHANGED; a held
    quorum's by the compiled ``settle``: outcome, ``then`` callbacks, one
    failing, a group settled before left as it was) and left, open group
    cleared and listeners told, the pusher's fields read at their slots or
    through its attributes."""
    marks, end, committed = case
    got = {(check, t): _quorum_case(check, t, marks, end, committed, own)
           for check in CHECKS for t in (_QuorumFields, _SlottedQuorum)}
    first = next(iter(got.values()))
    assert all(v == first for v in got.values())
    assert first[4][:1] in ([], [(3, Code.TERM_CHANGED)]) and 5 not in dict(first[4])
    assert first[5] == [(last, last) for last, code in first[4] if last != 8]


class _CommitStore:
    """What ``update_committed_index`` reaches of a ``DLedgerMmapFileStore``,
    recorded."""

    def __init__(self, end: int, committed: int, begin: int, kept: list) -> None:
        self.ledger_end_index = end
        self.member_state = SimpleNamespace(role=Role.LEADER, curr_term=2)
        self.committed_index = committed
        self._recent = kept
        self._recent_first = 4
        self.ledger_begin_index = begin
        self.committed_pos = -1
        self.log: list = []

    def _end_of(self, index: int) -> int:
        self.log.append(index)
        return 1000 + index


class _SlottedCommitStore(_CommitStore):
    __slots__ = ("ledger_end_index", "member_state", "committed_index", "_recent",
                 "ledger_begin_index", "committed_pos", "_recent_first")  # (as above)


COMMITS = [mmap_store_mod._update_committed_index, getattr(C, "update_committed_index", None)]


@pytest.mark.compiled_only
@pytest.mark.parametrize("case", [(2, 5, 9, 3, 0), (2, -1, 9, 3, 0), (2, 5, -1, -1, 0),
                                  (1, 5, 9, 3, 0), (3, 12, 9, 3, 0), (2, 3, 9, 3, 0),
                                  (2, 6, 9, 3, 7), (2, 8, 9, 3, 0), (2, 2 ** 70, 9, 3, 0)])
def test_update_committed_index_compiled_and_twin_alike(case):
    """``DLedgerMmapFileStore.update_committed_index`` compiled and its twin:
    the same committed index and position (from the kept entry, or from
    ``_end_of`` when none is kept or it lies before the log's begin), and
    nothing moved for an older term, an index of -1, an empty log or an
    index at or below the committed one, the store's fields read at their
    slots or through its attributes."""
    term, index, end, committed, begin = case
    got = []
    for commit in COMMITS:
        for t in (_CommitStore, _SlottedCommitStore):
            kept = [Entry(index=i, term=2, pos=100 * i, size=60) for i in range(4, 8)]
            store = t(end, committed, begin, kept)
            commit(store, term, index)
            got.append((store.committed_index, store.committed_pos, store.log))
    assert all(g == got[0] for g in got)
