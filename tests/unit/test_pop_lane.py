"""The pop lane's pieces: its answer frames are what the general path writes
for the same processor result, and both lanes (compiled and twin) walk the
same frames, hand their support the same requests and count what they
answered with its response code (request timing)."""

from __future__ import annotations

import asyncio
import random

import pytest

from fuzz.targets import _PopSupport
from rmq._fast import compiled_or_none
from rmq.broker.pop_lane import (
    PopLane,
    PopLaneSupport,
    answer_frame,
    bind_frame,
    frame,
    make_codec,
    read_request,
)
from rmq.broker.processor.pop import PopResult, answer_ext, response
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting.command import RPC_RESPONSE, RemotingCommand
from rmq.remoting.config import NettyServerConfig
from rmq.remoting.exceptions import RemotingCommandError
from rmq.remoting.server import RemotingServer

C_POP_LANE = compiled_or_none("pop_lane")
LANES = [PopLane] + ([C_POP_LANE.PopLane] if C_POP_LANE is not None else [])
R = RequestCode


def _general(result: tuple, opaque: int, stype: int) -> bytes:
    """What the remoting layer writes for the processor's response."""
    cmd = response(*result[:4])
    cmd.opaque, cmd.serialize_type = opaque, stype
    cmd.flag |= RPC_RESPONSE
    return cmd.encode()


@pytest.mark.parametrize("stype", [0, 1])
@pytest.mark.parametrize("result", [
    (0, None, {"popTime": "1700000000000", "invisibleTime": "60000", "reviveQid": "3",
               "restNum": "12", "startOffsetInfo": "0 1 32", "msgOffsetInfo": "0 1 32,33"},
     [b"rec-one", memoryview(b"rec-two")], 14),
    (0, None, {"popTime": "1", "orderCountInfo": "0 1 0"}, [], 0),
    (210, "NO_MESSAGE_IN_QUEUE", None, None, 0),
    (1, "bad batch ack body: \"quoted\" é", None, None, 0),
    (0, None, {}, None, 0),
])
def test_answer_frames_are_the_general_paths(result, stype):
    assert answer_frame(*result, 77, stype) == _general(result, 77, stype)


def _frame(code: int, ext: dict | None, body: bytes | None, opaque: int) -> bytes:
    return RemotingCommand(code, 0, 409, opaque, 0, None, ext, body, 0).encode()


@pytest.mark.parametrize("make", LANES)
def test_lanes_walk_frames_and_count_answers(make):
    pop = {"consumerGroup": "g", "topic": "t", "queueId": "0", "maxMsgNums": "8",
           "invisibleTime": "1000"}
    rest = (_frame(R.POP_MESSAGE, {**pop, "consumerGroup": "decline"}, None, 4)
            + _frame(R.ACK_MESSAGE, {"consumerGroup": "g"}, None, 5))
    data = (_frame(R.POP_MESSAGE, pop, None, 1)
            + _frame(R.BATCH_ACK_MESSAGE, None, b'{"acks":[]}', 2)
            + _frame(R.ACK_MESSAGE, {"consumerGroup": "g"}, None, 3) + rest)
    support = _PopSupport()
    lane = make(support, 1 << 20)
    taken, out = lane.serve(None, data, 0, len(data))
    assert data[taken:] == rest  # the declined pop goes the general way, and what follows
    assert [c[0] for c in support.calls] == [R.POP_MESSAGE, R.BATCH_ACK_MESSAGE,
                                             R.ACK_MESSAGE, R.POP_MESSAGE]
    assert support.calls[1][2] == b'{"acks":[]}' and support.calls[0][2] is None
    assert out.count(b"), 1, 0)") == 1 and out.count(b"), 3, 0)") == 1
    assert sorted(lane.served()) == [(R.POP_MESSAGE, False, 1, 0),
                                     (R.ACK_MESSAGE, False, 1, 0),
                                     (R.BATCH_ACK_MESSAGE, False, 1, 0)]
    # a frame of another code ends the turn at once
    other = _frame(R.PULL_MESSAGE, {"consumerGroup": "g"}, None, 6)
    assert lane.serve(None, other, 0, len(other)) == (0, None) and lane.served() == []


@pytest.mark.skipif(C_POP_LANE is None, reason="not built")
def test_compiled_lane_reads_frames_where_they_lie_as_the_twin_reads_them():
    """With the compiled ``read_request`` as its reader, the compiled lane
    reads each frame's header where it lies in the receive buffer (and copies
    an ack's body out of it there): the same requests, bodies and answers as
    the twin lane reading copies, from any position."""
    pop = {"consumerGroup": "g", "topic": "t", "queueId": "0", "maxMsgNums": "8",
           "invisibleTime": "1000"}
    data = (_frame(R.POP_MESSAGE, pop, None, 1)
            + _frame(R.BATCH_ACK_MESSAGE, None, b'{"acks":[]}', 2)
            + _frame(R.ACK_MESSAGE, {"consumerGroup": "g"}, b"body", 3)
            + _frame(R.BATCH_ACK_MESSAGE, {"consumerGroup": "g"}, b'{"acks":[1]}', -4)
            + _frame(R.POP_MESSAGE, {**pop, "consumerGroup": "decline"}, None, 5))
    for lead in (0, 3, 17):
        buf = bytearray(b"x" * lead + data + b"tail")
        got = []
        for make, read in ((PopLane, read_request), (C_POP_LANE.PopLane, C_POP_LANE.read_request)):
            support = _PopSupport()
            support.read = read
            lane = make(support, 1 << 20)
            got.append((lane.serve(None, buf, lead, lead + len(data)), support.calls,
                        sorted(lane.served())))
        assert got[0] == got[1], lead
        assert got[0][0][0] == lead + len(data) - len(_frame(R.POP_MESSAGE, {
            **pop, "consumerGroup": "decline"}, None, 5))


class _Answers(_PopSupport):
    """Answers each ack with the response code its ``r`` field names."""

    def take(self, channel, code: int, ext: dict | None, body) -> tuple | None:
        got = super().take(channel, code, ext, body)
        return (int(ext["r"]), None) if ext and "r" in ext else got


@pytest.mark.skipif(C_POP_LANE is None, reason="not built")
def test_compiled_lane_counts_served_as_the_twin():
    """The compiled lane keeps its counts in a C block: the same (code,
    count, response) rows as the twin's dict, in the order first met, over
    more pairs than the block's first room and anew each serve."""
    data = b"".join(_frame(R.ACK_MESSAGE, {"consumerGroup": "g", "r": str(r)}, None, i)
                    for i, r in enumerate([0, 17, 0, 3, 3, 9, 0, 1, 2, 4, 5, 6, 17, 7, 8]))
    data += _frame(R.BATCH_ACK_MESSAGE, None, b'{"acks":[]}', 99)
    again = _frame(R.BATCH_ACK_MESSAGE, None, b'{"acks":[]}', 100)
    got = []
    for make in (PopLane, C_POP_LANE.PopLane):
        lane = make(_Answers(), 1 << 20)
        lane.serve(None, data, 0, len(data))
        first = lane.served()
        lane.serve(None, again, 0, len(again))
        got.append((first, lane.served()))
    assert got[0] == got[1]
    assert got[0][0][:2] == [(R.ACK_MESSAGE, False, 3, 0), (R.ACK_MESSAGE, False, 2, 17)]
    assert got[0][1] == [(R.BATCH_ACK_MESSAGE, False, 1, 0)]


class _OwnTake(PopLaneSupport):
    """A ``PopLaneSupport`` whose class replaces ``take``: the lanes call it
    (the compiled lane runs its own ``take`` only for PopLaneSupport's)."""

    def __init__(self) -> None:  # no processors: nothing but take is asked
        make_codec()  # binds the compiled take, as PopLaneSupport's own __init__ does
        fake = _PopSupport()
        self.read, self.frame = fake.read, fake.frame
        self.failed_frame, self.later = fake.failed_frame, fake.later
        self.calls = fake.calls
        self._take = fake.take

    def take(self, channel, code: int, ext: dict | None, body) -> tuple | None:
        return self._take(channel, code, ext, body)


@pytest.mark.parametrize("make", LANES)
def test_lanes_call_a_take_that_replaces_the_supports(make):
    data = (_frame(R.ACK_MESSAGE, {"consumerGroup": "g"}, None, 1)
            + _frame(R.BATCH_ACK_MESSAGE, None, b'{"acks":[]}', 2))
    support = _OwnTake()
    taken, out = make(support, 1 << 20).serve(None, data, 0, len(data))
    assert taken == len(data) and out is not None
    assert [c[0] for c in support.calls] == [R.ACK_MESSAGE, R.BATCH_ACK_MESSAGE]


@pytest.mark.parametrize("make", LANES)
def test_lanes_decode_only_frames_that_start_as_theirs(make):
    """A ROCKETMQ header (16-bit codes: 200050 does not fit), other spacing or
    a code that merely starts like theirs is left alone without a decode."""
    pop = {"consumerGroup": "g"}
    rocketmq = RemotingCommand(R.POP_MESSAGE, 0, 409, 1, 0, None, pop, None, 1).encode()
    spaced = _frame(R.POP_MESSAGE, pop, None, 2).replace(b'"code":', b'"code": ', 1)
    spaced = (len(spaced) - 4).to_bytes(4, "big") + spaced[4:7] + bytes([spaced[7] + 1]) + \
        spaced[8:]
    longer = _frame(2000500, pop, None, 3)
    assert RemotingCommand.decode(spaced[4:]).code == R.POP_MESSAGE  # a well-formed frame
    for data in (rocketmq, spaced, longer):
        support = _PopSupport()
        assert make(support, 1 << 20).serve(None, data, 0, len(data)) == (0, None)
        assert support.calls == []


def _pop_answer(pop_time=1700000000123, invisible=60000, revive_qid=3, rest=12,
                start=("0 1 32", "0 2 7"), msg=("0 1 32,33", "0 2 7"), orderly=False,
                bodies=(b"rec-one", b"rec-two"), size=None) -> tuple:
    out = PopResult(bodies=[memoryview(b) if i % 2 else b for i, b in enumerate(bodies)],
                    count=len(bodies), start_info=list(start), msg_info=list(msg),
                    order_info=["0 1 0"] if orderly else [], rest=rest,
                    size=sum(map(len, bodies)) if size is None else size, pop_time=pop_time,
                    invisible=invisible, revive_qid=revive_qid, orderly=orderly)
    return (ResponseCode.SUCCESS, None, out, out.bodies, out.size)


_ANSWERS = [
    _pop_answer(),
    _pop_answer(start=("0 1 32",), msg=("0 1 32",), bodies=(b"x" * 5000,)),
    _pop_answer(pop_time=0, invisible=1, revive_qid=0, rest=0),
    _pop_answer(invisible=2**63 - 1, rest=2**62, pop_time=-5),
    _pop_answer(invisible=2**63, rest=10**30),  # past 64 bits: the twin writes them
    _pop_answer(start=("1 0 5", "0 7 123456789012"), msg=("1 0 5,6,7", "0 7 1,2")),
    _pop_answer(start=(), msg=()),
    _pop_answer(start=("0 1 2", ""), msg=("", "0 1 2")),
    _pop_answer(start=('0 "q" 1',), msg=("0 \\ 1",)),  # texts to escape
    _pop_answer(start=("0 \x01 1",), msg=("0\t1",)),
    _pop_answer(start=("0 é 1",), msg=("0 é 1",)),  # not ASCII
    _pop_answer(orderly=True),
    _pop_answer(bodies=()),
    (ResponseCode.SUCCESS, None, {"popTime": "1"}, [b"r"], 1),
    (ResponseCode.POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE", None, None, 0),
    (ResponseCode.SUCCESS, None),
    (0, None),
    (ResponseCode.SYSTEM_ERROR, "bad batch ack body: \"quoted\" é"),
    (2**31 - 1, None),
    (-(2**31), None),
    (True, None),
]


@pytest.mark.skipif(C_POP_LANE is None, reason="not built")
@pytest.mark.parametrize("stype", [0, 1])
def test_compiled_answer_frames_are_the_twins(stype):
    """The compiled ``frame`` writes a found pop's and a plain answer's header
    from pieces of the general encoder's text: the same bytes as the twin
    (and the remoting layer's for the processor's response) for every value,
    and whatever it does not write itself left to the twin."""
    bind_frame(C_POP_LANE)
    for answer in _ANSWERS:
        for opaque in (0, 1, 77, 2**31 - 1, -(2**31), -5):
            want = frame(answer, opaque, stype)
            assert C_POP_LANE.frame(answer, opaque, stype) == want, (answer, opaque)
            general = answer if len(answer) == 2 else \
                (answer[0], answer[1], answer_ext(answer[2]), answer[3])
            assert want == _general(general, opaque, stype), (answer, opaque)
    for answer in (_pop_answer(), (0, None)):  # an opaque past int32: both refuse it
        for write in (frame, C_POP_LANE.frame):
            with pytest.raises(RemotingCommandError):
                write(answer, 2**31, stype)
    bodies = (b"abc", b"de")  # records that are not the size the answer says
    with pytest.raises(ValueError):
        C_POP_LANE.frame(_pop_answer(bodies=bodies, size=4), 1, 0)


def _same_read(frame_bytes: bytes) -> None:
    view = memoryview(bytearray(frame_bytes))
    want = read_request(view)
    got = C_POP_LANE.read_request(view)
    if want is None or got is None:
        assert got is want, frame_bytes
    else:
        assert got[:4] == want[:4] and (got[4] is None) == (want[4] is None), frame_bytes
        assert got[4] is None or bytes(got[4]) == bytes(want[4]), frame_bytes


@pytest.mark.skipif(C_POP_LANE is None, reason="not built")
def test_compiled_request_reader_is_the_twins():
    """The compiled ``read_request`` takes the frames the twin takes, with the
    same code, opaque, serialization, extFields and body: the lane's
    requests, other codes, responses, oneway requests, ROCKETMQ headers and
    thousands of mutated frames."""
    bind_frame(C_POP_LANE)
    pop = {"consumerGroup": "g", "topic": "t", "queueId": "0", "maxMsgNums": "8",
           "invisibleTime": "1000"}
    seeds = [RemotingCommand(code, 0, 409, opaque, flag, None, ext, body, stype).encode()[4:]
             for code, ext, body in ((R.POP_MESSAGE, pop, None),
                                     (R.ACK_MESSAGE, {"consumerGroup": "g"}, None),
                                     (R.BATCH_ACK_MESSAGE, None, b'{"acks":[]}'),
                                     (R.PULL_MESSAGE, pop, None), (2000500, pop, None))
             for opaque in (0, 7, -3) for flag in (0, 1, 2, 3) for stype in (0, 1)]
    for seed in seeds:
        _same_read(seed)
    rnd = random.Random(37)
    for _ in range(4000):
        data = bytearray(rnd.choice(seeds))
        for _ in range(rnd.randint(1, 3)):
            i = rnd.randrange(len(data))
            r = rnd.random()
            if r < 0.4:
                data[i] = rnd.randrange(256)
            elif r < 0.7:
                del data[i]
            else:
                data.insert(i, rnd.choice(b'0123456789{}":, '))
        _same_read(bytes(data))


class _LaterSupport(_PopSupport):
    """Answers a pop later (a future left pending, as a pop waiting for
    messages is), the acks at once."""

    def __init__(self) -> None:
        super().__init__()
        self.pending: list[asyncio.Future] = []
        self.answered: list = []

    def take(self, channel, code: int, ext: dict | None, body) -> object:
        self.calls.append((code, ext, None if body is None else bytes(body)))
        if code != R.POP_MESSAGE:
            return (0, None)
        fut = asyncio.get_running_loop().create_future()
        self.pending.append(fut)
        return fut

    def later(self, _channel, task, *_args) -> None:
        task.add_done_callback(self.answered.append)


class _Unused:
    def process_request(self, *_args) -> None:
        raise AssertionError("the lane serves these requests here")


def _server(pop_limit: int) -> RemotingServer:
    server = RemotingServer(NettyServerConfig(), name="pop-lane-test")
    server.register_processor(R.POP_MESSAGE, _Unused(), pop_limit, pool="pull")
    server.register_processor(R.PEEK_MESSAGE, _Unused(), pop_limit, pool="pull")
    for code in (R.ACK_MESSAGE, R.BATCH_ACK_MESSAGE):
        server.register_processor(code, _Unused(), None, pool="consumer_manager")
    return server


@pytest.mark.parametrize("make", LANES)
def test_lane_counts_requests_answered_later_in_flight_and_stop_cancels_them(make):
    """A pop the lane takes and answers later fills its pool's in-flight
    room as the general path's would: once the room is full, the lane leaves
    the next pop to the general path (which answers SYSTEM_BUSY), acks still
    go; the count falls when the answer comes; and the server's ``stop``
    waits for such a pop and then cancels it, as it does the general path's."""
    pop = {"consumerGroup": "g", "topic": "t", "queueId": "0", "maxMsgNums": "8",
           "invisibleTime": "1000", "pollTime": "5000"}

    async def run() -> None:
        server = _server(2)
        support = _LaterSupport()
        lane = make(support, 1 << 20, server)
        adm = server.admission_of(R.POP_MESSAGE)
        data = b"".join(_frame(R.POP_MESSAGE, pop, None, i) for i in range(3))
        taken, out = lane.serve(None, data, 0, len(data))
        assert out is None and len(support.pending) == 2 and adm.in_flight == 2
        assert data[taken:] == _frame(R.POP_MESSAGE, pop, None, 2)  # over the room: general
        ack = _frame(R.ACK_MESSAGE, {"consumerGroup": "g"}, None, 9)
        assert lane.serve(None, ack, 0, len(ack))[0] == len(ack)  # acks have their own room
        support.pending[0].set_result((0, None))
        await asyncio.sleep(0)
        assert adm.in_flight == 1 and len(support.answered) == 1
        taken, _ = lane.serve(None, data, 0, len(data))  # room for one again
        assert taken == len(data) // 3 and adm.in_flight == 2
        await server.stop(grace_seconds=0.05)
        assert all(f.cancelled() for f in support.pending[1:]) and adm.in_flight == 0
        assert len(support.answered) == 3  # the lane's done callbacks ran (cancelled)

    asyncio.run(asyncio.wait_for(run(), 10))


@pytest.mark.parametrize("make", LANES)
def test_lane_without_a_server_bounds_nothing(make):
    pop = {"consumerGroup": "g", "topic": "t", "queueId": "0"}

    async def run() -> None:
        support = _LaterSupport()
        lane = make(support, 1 << 20)
        data = b"".join(_frame(R.POP_MESSAGE, pop, None, i) for i in range(5))
        assert lane.serve(None, data, 0, len(data))[0] == len(data)
        for f in support.pending:
            f.cancel()

    asyncio.run(asyncio.wait_for(run(), 10))


@pytest.mark.compiled_only
def test_the_compiled_frame_needs_the_pop_answers_fields_as_plain_slots():
    """The compiled ``frame`` reads a pop answer's fields at the slots ``bind``
    found: a class naming them without holding them as plain slots is refused
    there, before anything is bound."""
    c = compiled_or_none("pop_lane")

    class Named:  # the fields' names, no slots behind them
        pass

    Named.__slots__ = PopResult.__slots__
    with pytest.raises(TypeError, match="not a plain slot"):
        c.bind(None, Named, None, None, None, None, None)
