"""The DLedger leader's send lane answers a read whose quorum wait failed as
the general path answers each of its sends: the same failure response, in
each request's serialization, with its opaque; a read whose wait succeeded
gets its answers as built, in one write."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rmq.broker.config import BrokerConfig
from rmq.broker.dledger_lane import ANSWERED, _answer
from rmq.broker.processor.send_support import SendSupport
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
    # (opaque, serialize type) of a read's answered sends (as ``store_read``
    # packs them: oneway ones left out), a negative opaque among them
    asked = [(7, codec.JSON), (8, codec.ROCKETMQ), (-9, codec.JSON), (2**31 - 1, codec.ROCKETMQ)]
    _answer(processor, channel, b"never written",
            b"".join(ANSWERED.pack(op, st) for op, st in asked), _put_status(code))
    status = _put_status(code)
    assert channel.writes == [b"".join(_general(processor, status, op, st) for op, st in asked)]


def test_a_quorum_answers_the_read_as_built():
    channel = _Channel()
    _answer(_processor(), channel, b"frames", ANSWERED.pack(1, codec.JSON), _put_status(None))
    assert channel.writes == [b"frames"]
    assert channel.more  # (with the other reads' answers of the quorum, at the turn's end)
