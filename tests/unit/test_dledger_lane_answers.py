"""The DLedger leader's send lane answers a read whose quorum wait failed as
the general path answers each of its sends: the same failure response, in
each request's serialization, with its opaque; a read whose wait succeeded
gets its answers as built, in one write."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rmq._fast import compiled_or_none
from rmq.broker.config import BrokerConfig
from rmq.broker.dledger_lane import _Answer
from rmq.broker.processor.send_support import SendSupport
from rmq.broker.send_lane import _plain_answers, response_frame
from rmq.dledger.commit_log import _put_status
from rmq.dledger.protocol import Code
from rmq.remoting import codec
from rmq.store.results import (
    AppendMessageResult,
    AppendMessageStatus,
    PutMessageResult,
    PutMessageStatus,
)

pytestmark = pytest.mark.timeout(30)

_LANE = compiled_or_none("send_lane")


class _Channel:
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write_bytes(self, frames: bytes, more: bool = False) -> None:
        self.writes.append(frames)
        self.more = more


def _processor() -> SendSupport:
    controller = SimpleNamespace(
        broker_config=BrokerConfig(), topic_config_manager=None,
        subscription_group_manager=None, store_config=SimpleNamespace(maxMessageSize=4 << 20),
        message_store=SimpleNamespace(disk_util=lambda: "0.5"))
    return SendSupport(controller)


def _general(processor: SendSupport, status: PutMessageStatus, opaque: int, stype: int) -> bytes:
    """What the general path writes for a send whose quorum wait ended in
    ``status`` (its put result was PUT_OK until then)."""
    result = PutMessageResult(PutMessageStatus.PUT_OK,
                              AppendMessageResult(AppendMessageStatus.PUT_OK, 1000, 200))
    result.status = status
    response = processor.put_result_response(result, 3)
    response.opaque = opaque
    response.flag |= 1
    response.serialize_type = stype
    return response.encode()


@pytest.mark.parametrize("code", [Code.WAIT_QUORUM_ACK_TIMEOUT, Code.TERM_CHANGED,
                                  Code.NOT_LEADER])
def test_a_failed_quorum_wait_answers_as_the_general_path(code):
    processor = _processor()
    channel = _Channel()
    asked = [(7, codec.JSON), (8, codec.ROCKETMQ), (9, codec.JSON)]
    _Answer(processor, channel, b"never written", asked)(_put_status(code))
    status = _put_status(code)
    assert channel.writes == [b"".join(_general(processor, status, op, st) for op, st in asked)]


def test_a_quorum_answers_the_read_as_built():
    channel = _Channel()
    _Answer(_processor(), channel, b"frames", [(1, codec.JSON)])(_put_status(None))
    assert channel.writes == [b"frames"]
    assert channel.more  # (with the other reads' answers of the quorum, at the turn's end)


@pytest.mark.skipif(_LANE is None, reason="compiled extensions not built")
def test_a_reads_answers_compiled_and_twin_are_response_frame():
    """``plain_answers``: the compiled frames and asked list are the twin's,
    which are ``response_frame``'s per answered send (JSON and ROCKETMQ
    headers, oneway sends skipped, large offsets)."""
    tails = (b'","MSG_REGION":"DefaultRegion","TRACE_ON":"true","opaque":',
             b"\x00\x0aMSG_REGION\x00\x00\x00\x0dDefaultRegion\x00\x08TRACE_ON\x00\x00\x00\x04true")
    sends, stored = [], []
    for i in range(12):
        flag = 2 if i % 5 == 3 else 0
        stype = i % 2
        sends.append((100 * i, 310, flag, 7000 + i, stype, "T", i % 8))
        stored.append((None, (1 << 40) + 977 * i if i % 4 else i, 2**33 + i, 1200))
    host = b"7F00000100002A9F"
    got, want = [], []
    frames = _LANE.plain_answers(host, tails, sends, stored, got)
    assert frames == _plain_answers(host, tails, sends, stored, want) == b"".join(
        response_frame(host, put[1], send[6], put[2], send[3], tails[send[4]], send[4])
        for send, put in zip(sends, stored, strict=True) if not send[2] & 2)
    assert got == want == [(s[3], s[4]) for s in sends if not s[2] & 2]
    assert _LANE.plain_answers(host, tails, sends[:0], stored, []) == b""
    for bad in ((tails[0],), (tails[0], None)):
        with pytest.raises(TypeError):
            _LANE.plain_answers(host, bad, sends, stored, [])
    with pytest.raises(ValueError):
        _LANE.plain_answers(host, tails, [sends[0][:4] + (5,) + sends[0][5:]], stored, [])
