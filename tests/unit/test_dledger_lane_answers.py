"""The DLedger leader's send lane answers a read whose quorum wait failed as
the general path answers each of its sends: the same failure response, in
each request's serialization, with its opaque; a read whose wait succeeded
gets its answers as built, in one write."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from rmq.broker.config import BrokerConfig
from rmq.broker.dledger_lane import _Answer
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

    def write_bytes(self, frames: bytes) -> None:
        self.writes.append(frames)


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
async def test_a_failed_quorum_wait_answers_as_the_general_path(code):
    processor = _processor()
    channel = _Channel()
    asked = [(7, codec.JSON), (8, codec.ROCKETMQ), (9, codec.JSON)]
    quorum = asyncio.get_running_loop().create_future()
    quorum.add_done_callback(_Answer(processor, channel, b"never written", asked))
    quorum.set_result(_put_status(code))
    await asyncio.sleep(0)
    status = _put_status(code)
    assert channel.writes == [b"".join(_general(processor, status, op, st) for op, st in asked)]


async def test_a_quorum_answers_the_read_as_built():
    channel = _Channel()
    quorum = asyncio.get_running_loop().create_future()
    quorum.add_done_callback(_Answer(_processor(), channel, b"frames", [(1, codec.JSON)]))
    quorum.set_result(_put_status(None))
    await asyncio.sleep(0)
    assert channel.writes == [b"frames"]
