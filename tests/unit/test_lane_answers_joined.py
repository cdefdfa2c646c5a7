"""A frame lane's answers to the reads of one turn of the loop go out in one
write: while a read fills all the room it was offered, the loop reads the
connection again at once (uvloop reads until a read comes up short), so
those answers wait for the next read's and all leave together, in the
order of the requests, with a general-path answer in between kept in its
place.  A read that comes up short is answered at once, as before."""

from __future__ import annotations

import asyncio

import pytest

from rmq.remoting.channel import RemotingProtocol
from rmq.remoting.command import RemotingCommand

LANE_CODE = 310  # the stub lane takes these; any other code goes the general way
OTHER_CODE = 26


def _answer(opaque: int) -> bytes:
    resp = RemotingCommand.create_response(0)
    resp.opaque = opaque
    return resp.encode()


class _Lane:
    """Takes the whole leading frames of LANE_CODE, answers each with a
    response frame of its opaque."""

    def serve(self, channel, buf, pos: int, end: int):
        out = []
        while end - pos >= 4:
            length = int.from_bytes(buf[pos:pos + 4], "big")
            if end - pos - 4 < length:
                break
            cmd = RemotingCommand.decode(bytes(buf[pos + 4:pos + 4 + length]))
            if cmd.code != LANE_CODE:
                break
            out.append(_answer(cmd.opaque))
            pos += 4 + length
        return pos, b"".join(out) if out else None

    def served(self):
        return []


class _Service:
    pacer = None
    rpc_latency = None
    _rpc_hooks: list = []
    lane_after_hooks = False

    def __init__(self) -> None:
        self.lane = _Lane()

    def _channel_connected(self, channel) -> None:
        pass

    def _on_request(self, channel, cmd) -> None:
        resp = RemotingCommand.create_response(0)
        resp.opaque = cmd.opaque
        channel.send_response(resp)  # answered at once, as a quick processor is

    def _on_response(self, cmd) -> None:
        raise AssertionError("no responses expected")

    def _frame_error(self, channel, error) -> None:
        raise AssertionError(error)


class _Transport:
    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes]] = []

    def get_extra_info(self, name):
        return ("127.0.0.1", 1)

    def is_closing(self) -> bool:
        return False

    def write(self, data) -> None:
        self.calls.append(("write", bytes(data)))

    def writelines(self, parts) -> None:
        self.calls.append(("writelines", b"".join(bytes(p) for p in parts)))


def _opaques(data: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(data):
        length = int.from_bytes(data[pos:pos + 4], "big")
        out.append(RemotingCommand.decode(data[pos + 4:pos + 4 + length]).opaque)
        pos += 4 + length
    return out


def _stream(codes: list[int], body: int = 2000) -> bytes:
    frames = []
    for i, code in enumerate(codes):
        cmd = RemotingCommand.create_request(code, {"i": str(i)}, b"x" * body)
        cmd.opaque = 1000 + i
        frames.append(cmd.encode())
    return b"".join(frames)


def _connect() -> tuple[RemotingProtocol, _Transport]:
    proto = RemotingProtocol(_Service(), 16 * 1024 * 1024)
    transport = _Transport()
    proto.connection_made(transport)
    return proto, transport


def _read(proto: RemotingProtocol, data: bytes, pos: int, fill: bool) -> int:
    """One read as the loop makes it: the room offered, all of it when
    ``fill`` (more is waiting), else what is left (which must fit)."""
    room = proto.get_buffer(-1)
    n = len(room) if fill else len(data) - pos
    assert n <= len(room) and pos + n <= len(data)
    room[:n] = data[pos:pos + n]
    room.release()
    proto.buffer_updated(n)
    return pos + n


@pytest.mark.timeout(30)
async def test_a_short_read_is_answered_at_once():
    proto, transport = _connect()
    data = _stream([LANE_CODE])
    _read(proto, data, 0, fill=False)
    assert transport.calls == [("write", _answer(1000))]  # before the turn ends
    await asyncio.sleep(0)
    assert len(transport.calls) == 1


@pytest.mark.timeout(30)
async def test_reads_of_one_turn_answered_in_one_write_in_order():
    proto, transport = _connect()
    codes = [LANE_CODE] * 40
    data = _stream(codes)  # about 80 KiB: more than one full read
    pos = _read(proto, data, 0, fill=True)  # the first 4 KiB room, filled
    pos = _read(proto, data, pos, fill=True)  # the busy room, filled
    assert pos < len(data)
    assert transport.calls == []  # the loop reads again in this turn: held
    _read(proto, data, pos, fill=False)  # the short read that ends the turn's reads
    await asyncio.sleep(0)
    assert len(transport.calls) == 1
    assert _opaques(transport.calls[0][1]) == [1000 + i for i in range(len(codes))]
    # the next turn's short read is answered at once again
    _read(proto, _stream([LANE_CODE]), 0, fill=False)
    assert len(transport.calls) == 2 and transport.calls[1][0] == "write"


@pytest.mark.timeout(30)
async def test_a_general_answer_keeps_its_place_among_the_lanes():
    proto, transport = _connect()
    codes = [LANE_CODE] * 10 + [OTHER_CODE] + [LANE_CODE] * 30 + [OTHER_CODE] + [LANE_CODE] * 3
    data = _stream(codes)
    pos = _read(proto, data, 0, fill=True)
    while len(data) - pos > len(proto.get_buffer(-1)):
        pos = _read(proto, data, pos, fill=True)
    _read(proto, data, pos, fill=False)
    await asyncio.sleep(0)
    written = b"".join(data for _kind, data in transport.calls)
    assert _opaques(written) == [1000 + i for i in range(len(codes))]
    assert len(transport.calls) == 1


@pytest.mark.timeout(30)
async def test_held_answers_leave_at_the_end_of_the_turn_without_a_next_read():
    proto, transport = _connect()
    codes = [LANE_CODE] * 4
    data = _stream(codes, body=1200)
    pos = _read(proto, data, 0, fill=True)  # fills 4 KiB: the fourth frame is cut
    assert transport.calls == []
    await asyncio.sleep(0)  # nothing more came in this turn
    assert len(transport.calls) == 1
    assert _opaques(transport.calls[0][1]) == [1000, 1001, 1002]
    _read(proto, data, pos, fill=False)
    assert transport.calls[1] == ("write", _answer(1003))


@pytest.mark.timeout(30)
@pytest.mark.parametrize("size", [700, 2100, 5000])
async def test_frames_cut_by_reads_between_lane_runs_keep_their_order(size):
    """Reads that cut frames anywhere: a general frame after a lane run left
    incomplete waits for its rest, and every answer keeps its place."""
    proto, transport = _connect()
    codes = [LANE_CODE, OTHER_CODE, OTHER_CODE, LANE_CODE, LANE_CODE, OTHER_CODE] * 4
    data = _stream(codes)
    pos = 0
    while pos < len(data):
        room = proto.get_buffer(-1)
        n = min(size, len(room), len(data) - pos)
        room[:n] = data[pos:pos + n]
        room.release()
        proto.buffer_updated(n)
        pos += n
    await asyncio.sleep(0)
    written = b"".join(data for _kind, data in transport.calls)
    assert _opaques(written) == [1000 + i for i in range(len(codes))]
