"""A DLedger follower's push lane (``PushLane`` of rmq.dledger.server,
compiled in ``rmq._fast.dledger_follow``): the plain PUSH frames it finds
(``push_at``, compiled and twin alike), and the pushes it answers from the
receive buffer -- the same answer frames, files and committed index as the
general way (``_Processor.process_request``, its response encoded as the
dispatcher writes it), stopping at the first push the general way must take."""

from __future__ import annotations

import pytest

from rmq._fast import compiled, compiled_or_none
from rmq.dledger import messages, server
from rmq.dledger.protocol import Code, RequestCode
from rmq.dledger.rpc import PUSH_HEAD, PUSH_TAIL, push_frame
from rmq.remoting.command import RPC_RESPONSE, RemotingCommand
from tests.unit.test_dledger_follow_append import _files, _leader_entries, _member

C = compiled_or_none("dledger_follow")
AT = [server.py_push_at] + ([C.push_at] if C is not None else [])
LANES = [server.PyPushLane] + ([C.PushLane] if C is not None else [])
MAX = 1 << 20


def _header_frame(header: bytes, body: bytes = b"{}", top: int = 0) -> bytes:
    """A frame of ``header`` (its serialize type ``top`` in the top byte) and ``body``."""
    return ((4 + len(header) + len(body)).to_bytes(4, "big") +
            (len(header) | top << 24).to_bytes(4, "big") + header + body)


PLAIN = push_frame(PUSH_HEAD, 7, PUSH_TAIL, b'{"x":1}')
OTHER_FORMS = [
    _header_frame(b'{"code":51004,"flag":0,"language":"JAVA","opaque":7,"version":409}'),
    _header_frame(b'{"code":51001,"flag":0,"language":"JAVA","opaque":7,'
                  b'"serializeTypeCurrentRPC":"JSON","version":409}'),  # a heartbeat
    _header_frame(b'{"code":51004,"flag":1,"language":"JAVA","opaque":7,'
                  b'"serializeTypeCurrentRPC":"JSON","version":409}'),  # a response
    _header_frame(b'{"code":51004,"flag":2,"language":"JAVA","opaque":7,'
                  b'"serializeTypeCurrentRPC":"JSON","version":409}'),  # oneway
    _header_frame(b'{"code":51004,"extFields":{},"flag":0,"language":"JAVA","opaque":7,'
                  b'"serializeTypeCurrentRPC":"JSON","version":409}'),
    _header_frame(b'{"code":51004,"flag":0,"language":"JAVA","opaque":07,'
                  b'"serializeTypeCurrentRPC":"JSON","version":409}'),
    _header_frame(b'{"code":51004,"flag":0,"language":"JAVA","opaque":-0,'
                  b'"serializeTypeCurrentRPC":"JSON","version":409}'),
    _header_frame(b'{"code":51004,"flag":0,"language":"JAVA","opaque":2147483648,'
                  b'"serializeTypeCurrentRPC":"JSON","version":409}'),
    _header_frame(b'{"code":51004,"flag":0,"language":"JAVA","opaque":7,'
                  b'"serializeTypeCurrentRPC":"JSON","version":409} '),
    _header_frame(b'{"code":51004,"flag":0,"language":"JAVA","opaque":7,'
                  b'"serializeTypeCurrentRPC":"JSON","version":409}', top=1),
]


@pytest.mark.parametrize("at", AT)
def test_push_at_takes_the_plain_push_frame_alone(at) -> None:
    """The frame a leader writes (any opaque and version in int32), and
    nothing else: another code, flag or header form, a frame not whole or
    longer than the limit."""
    assert at(PLAIN, 0, len(PLAIN), MAX) == (7, len(PLAIN) - 7, len(PLAIN))
    buf = b"xx" + push_frame(PUSH_HEAD, -5, PUSH_TAIL.replace(b"409", b"-1"), b"")
    assert at(memoryview(buf), 2, len(buf), MAX) == (-5, len(buf), len(buf))
    for frame in OTHER_FORMS:
        assert at(frame, 0, len(frame), MAX) is None, frame
    assert at(PLAIN, 0, len(PLAIN) - 1, MAX) is None
    assert at(PLAIN, 0, len(PLAIN), len(PLAIN) - 5) is None
    assert at(PLAIN, 0, 7, MAX) is None


@pytest.mark.compiled_only
def test_push_at_twins_agree_on_every_cut_and_byte() -> None:
    """Compiled and twin alike on each prefix of a plain frame and on the
    frame with each header byte changed."""
    frames = [PLAIN[:n] for n in range(len(PLAIN) + 1)]
    for i in range(8, len(PLAIN) - 7):
        for b in (b"0", b"9", b"-", b" ", b'"'):
            frames.append(PLAIN[:i] + b + PLAIN[i + 1:])
    for f in frames:
        assert C.push_at(f, 0, len(f), MAX) == server.py_push_at(f, 0, len(f), MAX), f


def _general_answer(processor, frame: bytes) -> bytes | None:
    """The bytes the general way writes for the push ``frame``, None when it
    answers later (a parked push)."""
    cmd = RemotingCommand.decode(frame[4:])
    got = processor.process_request(None, cmd)
    if not isinstance(got, RemotingCommand):
        got.cancel()
        return None
    got.opaque = cmd.opaque
    got.flag |= RPC_RESPONSE
    return got.encode()


@pytest.mark.compiled_only  # (the lanes read pushes with the compiled decoder)
@pytest.mark.parametrize("lane_class", LANES)
def test_the_lane_answers_and_stores_as_the_general_way(tmp_path, lane_class) -> None:
    """A read of pushes through the lane and the same pushes through the
    processor one by one: the same answer frames, files, ends and committed
    index; the lane stops at the first push it must leave (one ahead of
    the follower's end, which the general way parks), and at a frame of
    another request."""
    entries = _leader_entries(tmp_path / "l", 40)
    script = [(0, 4, -1, True), (4, 8, 3, True), (8, 9, 7, False), (9, 20, 8, True)]
    frames = [push_frame(PUSH_HEAD, 100 + i, PUSH_TAIL, messages.push_append_body(
        "g", "n0", "n1", "n0", 2, commit, entries[first:end], batch))
        for i, (first, end, commit, batch) in enumerate(script)]
    ahead = push_frame(PUSH_HEAD, 200, PUSH_TAIL, messages.push_append_body(
        "g", "n0", "n1", "n0", 2, 19, entries[25:30], True))
    heartbeat = RemotingCommand.create_request(RequestCode.HEART_BEAT, None, b"{}").encode()

    general = _member(tmp_path / "general")
    processor = server._Processor(general)
    expected = b"".join(_general_answer(processor, f) for f in frames)
    assert b'"code":200,"count":11,"endIndex":19' in expected

    member = _member(tmp_path / "lane")
    lane = lane_class(server._Processor(member)._append_rows, MAX, server.ANSWER_HEAD,
                      PUSH_TAIL)
    buf = memoryview(b"".join(frames) + ahead + frames[0])
    pos, out = lane.serve(None, buf, 0, len(buf))
    assert pos == len(buf) - len(ahead) - len(frames[0]) and out == expected
    assert lane.served() == [(RequestCode.PUSH, False, len(frames), Code.SUCCESS)]
    assert _files(member.store) == _files(general.store)
    assert (member.store.ledger_end_index, member.store.committed_index) == \
        (general.store.ledger_end_index, general.store.committed_index) == (19, 8)

    buf = memoryview(heartbeat + frames[0])
    assert lane.serve(None, buf, 0, len(buf)) == (0, None)
    assert lane.served() == [(RequestCode.PUSH, False, 0, Code.SUCCESS)]
    member.store.shutdown()
    general.store.shutdown()


@pytest.mark.compiled_only
@pytest.mark.parametrize("lane_class", LANES)
def test_the_lane_leaves_a_push_of_another_member_to_the_general_way(tmp_path,
                                                                      lane_class) -> None:
    """A push to another member, of another group or to a member that does
    not follow is the general way's to refuse: the lane takes nothing."""
    entries = _leader_entries(tmp_path / "l", 4)
    member = _member(tmp_path / "m")
    lane = lane_class(server._Processor(member)._append_rows, MAX, server.ANSWER_HEAD,
                      PUSH_TAIL)
    for to, group in (("n2", "g"), ("n1", "h")):
        frame = push_frame(PUSH_HEAD, 1, PUSH_TAIL, messages.push_append_body(
            group, "n0", to, "n0", 2, -1, entries, True))
        assert lane.serve(None, memoryview(frame), 0, len(frame)) == (0, None)
    member.member_state.change_to_candidate(3)
    frame = push_frame(PUSH_HEAD, 1, PUSH_TAIL, messages.push_append_body(
        "g", "n0", "n1", "n0", 2, -1, entries, True))
    assert lane.serve(None, memoryview(frame), 0, len(frame)) == (0, None)
    assert member.store.ledger_end_index == -1
    member.store.shutdown()


def test_the_group_server_serves_with_the_lane(tmp_path) -> None:
    """A member's remoting server gets its processor and the push lane (the
    compiled lane when built, else the twin)."""
    from rmq.remoting import RemotingServer
    from rmq.remoting.config import NettyServerConfig

    c = compiled("dledger_follow")
    assert server.PushLane is (server.PyPushLane if c is None else c.PushLane)
    member = _member(tmp_path / "m")
    remoting = RemotingServer(NettyServerConfig(listenPort=0), None, name="dledger")
    member.serve_on(remoting)
    assert type(remoting.lane) is server.PushLane
    assert type(remoting._default.processor) is server._Processor
    member.store.shutdown()


def test_without_the_compiled_decoder_the_twin_lane_takes_nothing(tmp_path,
                                                                   monkeypatch) -> None:
    """Where ``push_fields`` reads no push (the extensions not built) every
    push goes the general way: the twin lane leaves the read whole."""
    monkeypatch.setattr(server, "push_fields", lambda body: None)
    entries = _leader_entries(tmp_path / "l", 4)
    member = _member(tmp_path / "m")
    lane = server.PyPushLane(server._Processor(member)._append_rows, MAX, server.ANSWER_HEAD,
                             PUSH_TAIL)
    frame = push_frame(PUSH_HEAD, 1, PUSH_TAIL, messages.push_append_body(
        "g", "n0", "n1", "n0", 2, -1, entries, True))
    assert lane.serve(None, memoryview(frame), 0, len(frame)) == (0, None)
    assert member.store.ledger_end_index == -1
    member.store.shutdown()


@pytest.mark.compiled_only  # (the lanes read pushes with the compiled decoder)
@pytest.mark.parametrize("lane_class", LANES)
def test_a_push_whose_append_raised_goes_the_general_way(tmp_path, lane_class, caplog) -> None:
    """``append_rows`` raising (a commit listener's bug): logged, and the
    push is left to the general way, which answers it."""
    entries = _leader_entries(tmp_path / "l", 4)
    member = _member(tmp_path / "m")
    processor = server._Processor(member)
    calls = []

    def failing(fields):
        calls.append(fields)
        raise RuntimeError("a listener's bug")

    lane = lane_class(failing, MAX, server.ANSWER_HEAD, PUSH_TAIL)
    frame = push_frame(PUSH_HEAD, 1, PUSH_TAIL, messages.push_append_body(
        "g", "n0", "n1", "n0", 2, -1, entries, True))
    assert lane.serve(None, memoryview(frame), 0, len(frame)) == (0, None)
    assert len(calls) == 1 and "push lane: a push from n0 failed" in caplog.text
    assert _general_answer(processor, frame) is not None
    assert member.store.ledger_end_index == 3
    member.store.shutdown()
