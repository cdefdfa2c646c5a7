"""The compiled ``get_buffer`` and ``buffer_updated`` (rmq._fast.protocol_reads)
against their twins (rmq.remoting.channel ``_get_buffer``, ``_buffer_updated``),
with the channel's compiled ``write_bytes`` and ``flush`` against theirs
(``_write_bytes``, ``_flush``):
the same reads of a stream mixing lane frames, general frames and garbage,
cut anywhere, give the same writes to the transport in the same order, the
same requests to the service and the same receive-buffer state after every
read -- the protocol's fields read at their slots (``RemotingProtocol``
itself) and through their attributes (a subclass)."""

from __future__ import annotations

import asyncio
import random

import pytest

from rmq._fast import compiled_or_none
from rmq.remoting import channel as ch
from rmq.remoting import codec
from rmq.remoting.channel import RemotingProtocol
from rmq.remoting.command import RemotingCommand
from rmq.remoting.read_nap import ENOUGH_FRAMES
from tests.unit.test_lane_answers_joined import LANE_CODE, OTHER_CODE
from tests.unit.test_lane_answers_joined import _Lane as _JoinedLane

_C = compiled_or_none("protocol_reads")
if _C is not None:  # (a twin build's channel module does not bind it)
    _C.bind(codec.decode_frames, ch._INITIAL_BUFFER, ch._BUSY_BUFFER, ch._QUIET_READS,
            ch._SMALL_READ, ch._MIN_FREE, ch.ENOUGH_FRAMES)

pytestmark = pytest.mark.compiled_only

GARBAGE = b"\x00\x00\x00\x09\xff\xff\xff\xff\xffabcd"  # a frame that does not decode


class _Lane(_JoinedLane):
    """``_JoinedLane`` that never reaches the garbage frame (the general
    decode reports it)."""

    def serve(self, channel, buf, pos: int, end: int):
        bad = bytes(buf[pos:end]).find(GARBAGE)
        return super().serve(channel, buf, pos, end if bad < 0 else pos + bad)


class _Hook:
    def do_before_request(self, addr, cmd) -> None:
        pass


class _Pacer:
    """Keeps what each read told it: the frames it held."""

    def __init__(self) -> None:
        self.told: list[int] = []

    def touch(self, frames: int) -> None:
        self.told.append(frames)


class _Service:
    def __init__(self, lane: bool, hooks: bool) -> None:
        self.pacer = _Pacer()
        self.rpc_latency = None
        self.lane = _Lane() if lane else None
        self._rpc_hooks = [_Hook()] if hooks else []
        self.lane_after_hooks = hooks
        self.got: list = []

    def _channel_connected(self, channel) -> None:
        pass

    def _on_request(self, channel, cmd) -> None:
        self.got.append(("request", cmd.code, cmd.opaque))
        resp = RemotingCommand.create_response(0)
        resp.opaque = cmd.opaque
        channel.send_response(resp)

    def _on_response(self, cmd) -> None:
        self.got.append(("response", cmd.opaque))

    def _frame_error(self, channel, error) -> None:
        self.got.append(("error", str(error)))
        channel.abort()

    def _admit(self, channel, cmd, start):
        self.got.append(("admit", cmd.opaque))
        return object() if cmd.code == LANE_CODE else None

    def _process(self, channel, cmd, entry, start) -> None:
        self.got.append(("process", cmd.opaque))


class _SlottedService(_Service):
    """A service whose per-read fields are slots, as ``RemotingServer``'s."""

    __slots__ = ("lane", "pacer", "_rpc_hooks", "rpc_latency")


class _Transport:
    def __init__(self, closing_after: int) -> None:
        self.calls: list = []
        self.closing_after = closing_after

    def get_extra_info(self, name):
        return ("127.0.0.1", 1)

    def is_closing(self) -> bool:
        return len(self.calls) >= self.closing_after

    def write(self, data) -> None:
        self.calls.append(("write", bytes(data)))

    def writelines(self, parts) -> None:
        self.calls.append(("writelines", b"".join(bytes(p) for p in parts)))

    def abort(self) -> None:
        self.calls.append(("abort",))

    def close(self) -> None:
        self.calls.append(("close",))


def _stream(rnd: random.Random, garbage: bool) -> bytes:
    frames = []
    for i in range(rnd.randrange(20, 120)):
        code = rnd.choice([LANE_CODE, LANE_CODE, LANE_CODE, OTHER_CODE])
        cmd = RemotingCommand.create_request(code, {"i": str(i)},
                                             b"x" * rnd.choice([0, 50, 900, 3000, 20000]))
        cmd.opaque = 1000 + i
        if rnd.random() < 0.05:
            cmd.mark_response()
        frames.append(cmd.encode())
    if garbage:
        frames.insert(rnd.randrange(len(frames)), GARBAGE)
    return b"".join(frames)


async def _trace(cls: type, seed: int, turns: bool = False) -> list:
    """Everything the reads of seed's stream leave behind, read by read;
    ``turns``: the loop's turn ends after every read (other connections'
    reads come between)."""
    rnd = random.Random(seed)
    service = (_SlottedService if seed % 2 else _Service)(lane=seed % 4 != 0,
                                                         hooks=seed % 5 == 1)
    data = _stream(rnd, garbage=seed % 7 == 3)
    transport = _Transport(closing_after=10 if seed % 6 == 2 else 1 << 30)
    proto = cls(service, 16 * 1024 * 1024)
    proto.connection_made(transport)
    trace: list = []
    pos = 0
    while pos < len(data) and not proto.channel._closed:
        room = proto.get_buffer(-1)
        offered = len(room)
        n = offered if rnd.random() < 0.3 else min(offered, rnd.randrange(1, 9000))
        n = min(n, len(data) - pos)
        room[:n] = data[pos:pos + n]
        room.release()
        proto.buffer_updated(n)
        pos += n
        trace.append((offered, proto._start, proto._end, proto._offered, proto._full,
                      proto._small, len(proto._buf), proto._lane_used,
                      proto.channel.last_active > 0, len(transport.calls), len(service.got)))
        if rnd.random() < 0.3:
            await asyncio.sleep(0)  # the end of a turn: queued answers leave
        elif turns:
            await asyncio.sleep(0)
    for _ in range(ch._QUIET_READS + 1):  # quiet reads: a grown buffer given back
        if proto.channel._closed:
            break
        room = proto.get_buffer(-1)
        offered = len(room)
        small = RemotingCommand.create_request(LANE_CODE, {"q": "1"})
        small.opaque = 7  # (not the process's next: every run the same bytes)
        small = small.encode()
        room[:len(small)] = small
        room.release()
        proto.buffer_updated(len(small))
        trace.append((offered, proto._small, len(proto._buf), len(transport.calls)))
    await asyncio.sleep(0)
    return [trace, transport.calls, service.got, service.pacer.told]


class _Attributes(RemotingProtocol):
    """A subclass with an instance dict: its fields read through their
    attributes."""


class _Inherited(RemotingProtocol):
    """A subclass of no slots of its own (as ``ClientProtocol``): its fields
    read at the slots its base declares."""

    __slots__ = ()


def _reordered() -> type:
    """A protocol class of its own slot layout (RemotingProtocol's slots in
    the reverse order, its methods borrowed): the same field names at other
    offsets."""
    names = tuple(reversed(RemotingProtocol.__slots__))
    methods = {k: v for k, v in vars(RemotingProtocol).items()
               if k not in names and k not in ("__slots__", "__dict__", "__weakref__")}
    return type("_Reordered", (asyncio.BufferedProtocol,), {**methods, "__slots__": names})


_Reordered = _reordered()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("seed", range(28))
async def test_compiled_reads_are_the_twins(seed, monkeypatch):
    _bind(monkeypatch, ch._get_buffer, ch._buffer_updated, ch._write_bytes, ch._flush)
    twin = await _trace(RemotingProtocol, seed)
    assert twin[0] and twin[1]
    _bind(monkeypatch, _C.get_buffer, _C.buffer_updated, _C.write_bytes, _C.flush)
    for cls in (RemotingProtocol, _Attributes, _Reordered, _Inherited):
        assert await _trace(cls, seed) == twin


@pytest.mark.timeout(60)
@pytest.mark.parametrize("seed", range(8))
async def test_connections_of_classes_taking_turns(seed, monkeypatch):
    """Connections of four protocol classes (and two service classes) read
    in turns, as a DLedger leader reads its server and client connections:
    the offsets kept per class read each its own way, as when each is read
    alone."""
    seeds = (seed, seed + 101, seed + 202, seed + 303)
    _bind(monkeypatch, ch._get_buffer, ch._buffer_updated, ch._write_bytes, ch._flush)
    twins = [await _trace(RemotingProtocol, s, turns=True) for s in seeds]
    _bind(monkeypatch, _C.get_buffer, _C.buffer_updated, _C.write_bytes, _C.flush)
    turns = await asyncio.gather(*(_trace(cls, s, turns=True) for cls, s in
                                   zip((RemotingProtocol, _Attributes, _Reordered,
                                        _Inherited), seeds,
                                       strict=True)))
    assert turns == twins


def _bind(monkeypatch, get_buffer, buffer_updated, write_bytes, flush) -> None:
    """The protocol's reads and the channel's writes: compiled or twins."""
    monkeypatch.setattr(RemotingProtocol, "get_buffer", get_buffer)
    monkeypatch.setattr(RemotingProtocol, "buffer_updated", buffer_updated)
    monkeypatch.setattr(ch.Channel, "write_bytes", write_bytes)
    monkeypatch.setattr(ch.Channel, "_flush", flush)


class _AttrChannel(ch.Channel):
    """A subclass with an instance dict (its fields at the slots its base
    declares; the compiled writes find them anew for its class)."""


async def _writes(cls: type, seed: int) -> list:
    """The transport's calls of a channel of ``cls`` written at once,
    queued (``more``), flushed at the turn's end, closed."""
    rnd = random.Random(seed)
    transport = _Transport(closing_after=rnd.choice([3, 7, 1 << 30]))
    channel = cls(transport)
    trace = []
    for i in range(40):
        what = rnd.random()
        if what < 0.45:
            channel.write_bytes(b"frame%d" % i, rnd.random() < 0.6)
        elif what < 0.55:
            cmd = RemotingCommand.create_response(0)
            cmd.opaque = i
            channel.send_response(cmd)
        elif what < 0.9:
            await asyncio.sleep(0)  # the turn's end: the queue leaves
        elif what < 0.95:
            channel._flush()
        elif i > 30:
            channel.close()
        trace.append((list(transport.calls), channel._pending, channel.last_active > 0))
    await asyncio.sleep(0)
    return [trace, transport.calls]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("seed", range(12))
async def test_compiled_channel_writes_are_the_twins(seed, monkeypatch):
    """``Channel.write_bytes`` and ``_flush`` compiled (a lane's answers,
    a DLedger read's once its quorum holds) and their twins: the same
    writes to the transport, queued the same way, dropped the same way
    once the transport closes -- for a channel and a subclass of it."""
    _bind(monkeypatch, ch._get_buffer, ch._buffer_updated, ch._write_bytes, ch._flush)
    twin = await _writes(ch.Channel, seed)
    assert twin[1]
    _bind(monkeypatch, _C.get_buffer, _C.buffer_updated, _C.write_bytes, _C.flush)
    for cls in (ch.Channel, _AttrChannel):
        assert await _writes(cls, seed) == twin


def test_the_built_protocol_binds_the_compiled_reads():
    assert RemotingProtocol.get_buffer is _C.get_buffer
    assert RemotingProtocol.buffer_updated is _C.buffer_updated
    assert ch.Channel.write_bytes is _C.write_bytes and ch.Channel._flush is _C.flush


def test_the_server_fields_a_read_asks_are_slots():
    """``buffer_updated`` reads them at their slots (an attribute read of
    the server's dict costs ~150 instructions)."""
    from types import MemberDescriptorType

    from rmq.remoting.server import RemotingServer

    for name in ("lane", "pacer", "_rpc_hooks", "rpc_latency"):
        assert type(RemotingServer.__dict__.get(name)) is MemberDescriptorType, name


@pytest.mark.timeout(30)
@pytest.mark.parametrize("reads", ["twin", "compiled"])
async def test_a_read_tells_the_pacer_the_frames_it_held(reads, monkeypatch):
    """One frame whole; one and its neighbour's first byte; three bytes of a
    frame; the rest of it; one frame more than ENOUGH_FRAMES; three and a
    part: the pacer is told 1, 2, 1, 1, ENOUGH_FRAMES (counted up to it) and
    4 -- the compiled reads as their twins."""
    if reads == "twin":
        _bind(monkeypatch, ch._get_buffer, ch._buffer_updated, ch._write_bytes, ch._flush)
    else:
        _bind(monkeypatch, _C.get_buffer, _C.buffer_updated, _C.write_bytes, _C.flush)
    service = _Service(lane=False, hooks=False)
    proto = RemotingProtocol(service, 16 * 1024 * 1024)
    proto.connection_made(_Transport(closing_after=1 << 30))
    frame = RemotingCommand.create_request(OTHER_CODE, {"a": "1"}, b"x" * 100).encode()
    for data in (frame, frame + frame[:1], frame[1:3], frame[3:], frame * (ENOUGH_FRAMES + 1),
                 frame * 3 + frame[:20]):
        room = proto.get_buffer(-1)
        room[:len(data)] = data
        room.release()
        proto.buffer_updated(len(data))
    assert service.pacer.told == [1, 2, 1, 1, ENOUGH_FRAMES, 4]
    await asyncio.sleep(0)
