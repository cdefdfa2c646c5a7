"""TransactionalMessageService: prepare, end and back-check half messages
(``TransactionalMessageServiceImpl`` of RocketMQ 4.9.8).

The check walks each half queue from the internal group's offset.  Op
records read from the op queue say which half offsets are finished; an
unfinished half message old enough is put back at the end of the half queue
with TRANSACTION_CHECK_TIMES + 1 and a producer of its group is asked for
its state; one checked ``transactionCheckMax`` times is discarded.  Then
the group's half offset moves past what was processed and its op offset
over the contiguous run of consumed op records
(../shared/spec/STORE_FORMAT.md 13).

The walk runs on the broker loop: it yields to the loop every few messages,
and where 4.9.8 would spin (a put that keeps failing, a message not yet due
while no op records are left to read) it stops and leaves the message to the
next round, which 4.9.8 reaches too once its 60 s per queue are over.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from rmq.broker.transaction.bridge import (
    HALF_TOPIC,
    OP_TOPIC,
    REMOVE_TAG,
    PullResult,
    PullStatus,
    TransactionalMessageBridge,
    renew_half_message_inner,
    renew_immunity_half_message_inner,
)
from rmq.broker.transaction.check_listener import TransactionalMessageCheckListener
from rmq.common import message as mc
from rmq.common.codes import ResponseCode
from rmq.common.logging import TRANSACTION_LOGGER_NAME
from rmq.common.protocol.headers_broker import EndTransactionRequestHeader
from rmq.store import MessageExt, MessageExtBrokerInner, PutMessageResult, PutMessageStatus

log = logging.getLogger(TRANSACTION_LOGGER_NAME)

MAX_PROCESS_TIME_LIMIT_MS = 60000
MAX_RETRY_COUNT_WHEN_HALF_NULL = 1
OP_PULL_NUMS = 32
YIELD_EVERY = 32  # messages walked between two turns given back to the loop


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _java_long(text: str | None) -> int:
    """``getLong``/``getInt`` of the service: -1 for anything unparsable."""
    try:
        return int(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        log.error("GetLong error: %r", text)
        return -1


@dataclass(slots=True)
class OperationResult:
    """The half message an END_TRANSACTION names, or why it was not found."""

    prepare_message: MessageExt | None
    response_code: int
    response_remark: str | None = None


class TransactionalMessageService:
    def __init__(self, bridge: TransactionalMessageBridge,
                 file_reserved_hours: Callable[[], int]) -> None:
        self.bridge = bridge
        self.file_reserved_hours = file_reserved_hours  # read per check (runtime updates)

    # ---- prepare / end --------------------------------------------------------------
    async def prepare_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        return await self.bridge.put_half_message(msg)

    async def delete_prepare_message(self, half: MessageExt) -> bool:
        """Write the op record that ends ``half`` (commit or rollback)."""
        if await self.bridge.put_op_message(half):
            return True
        log.error("Transaction op message write failed. messageId is %s, queueId is %d",
                  half.msg_id, half.queue_id)
        return False

    def commit_message(self, header: EndTransactionRequestHeader) -> OperationResult:
        return self._half_message_by_offset(header.commitLogOffset)

    def rollback_message(self, header: EndTransactionRequestHeader) -> OperationResult:
        return self._half_message_by_offset(header.commitLogOffset)

    def _half_message_by_offset(self, commit_log_offset: int) -> OperationResult:
        msg = self.bridge.look_message_by_offset(commit_log_offset)
        if msg is None:
            return OperationResult(None, ResponseCode.SYSTEM_ERROR,
                                   "Find prepared transaction message failed")
        return OperationResult(msg, ResponseCode.SUCCESS)

    # ---- check --------------------------------------------------------------------------
    async def check(self, transaction_timeout_ms: int, transaction_check_max: int,
                    listener: TransactionalMessageCheckListener) -> None:
        """One back-check round over every half queue; errors are logged."""
        try:
            queues = self.bridge.fetch_message_queues(HALF_TOPIC)
            if not queues:
                log.warning("The queue of topic is empty :%s", HALF_TOPIC)
                return
            for queue_id in queues:
                await self._check_queue(queue_id, transaction_timeout_ms,
                                        transaction_check_max, listener)
        except Exception:
            log.exception("Check error")

    async def _check_queue(self, queue_id: int, timeout_ms: int, check_max: int,
                           listener: TransactionalMessageCheckListener) -> None:
        bridge = self.bridge
        start = _now_ms()
        half_offset = bridge.fetch_consume_offset(HALF_TOPIC, queue_id)
        op_offset = bridge.fetch_consume_offset(OP_TOPIC, queue_id)
        log.info("Before check, the queue=%d msgOffset=%d opOffset=%d", queue_id, half_offset,
                 op_offset)
        if half_offset < 0 or op_offset < 0:
            log.error("MessageQueue: %d illegal offset read: %d, op offset: %d, skip this queue",
                      queue_id, half_offset, op_offset)
            return
        done_op: list[int] = []
        removed: dict[int, int] = {}
        pull = self._fill_op_remove_map(removed, queue_id, op_offset, half_offset, done_op)
        if pull is None:
            log.error("The queue=%d check msgOffset=%d with opOffset=%d failed, pullResult is "
                      "null", queue_id, half_offset, op_offset)
            return
        null_count = 1
        new_offset = i = half_offset
        walked = 0
        while True:
            if _now_ms() - start > MAX_PROCESS_TIME_LIMIT_MS:
                log.info("Queue=%d process time reach max=%d", queue_id,
                         MAX_PROCESS_TIME_LIMIT_MS)
                break
            walked += 1
            if walked % YIELD_EVERY == 0:
                await asyncio.sleep(0)
            if i in removed:
                done_op.append(removed.pop(i))
                new_offset = i = i + 1
                continue
            got = bridge.get_half_message(queue_id, i, 1)
            msg = got.msg_found_list[0] if got is not None and got.msg_found_list else None
            if msg is None:
                if got is None or null_count > MAX_RETRY_COUNT_WHEN_HALF_NULL:
                    break
                null_count += 1
                if got.status is PullStatus.NO_NEW_MSG:
                    break
                log.info("Illegal offset, the miss offset=%d in=%d, continue check=%d", i,
                         queue_id, null_count)
                new_offset = i = got.next_begin_offset
                continue
            if self._need_discard(msg, check_max) or self._need_skip(msg):
                await listener.resolve_discard_msg(msg)
                new_offset = i = i + 1
                continue
            if msg.store_timestamp >= start:
                break  # stored after the round began: next round
            age = _now_ms() - msg.born_timestamp
            immunity = timeout_ms
            immunity_text = msg.properties.get(mc.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
            if immunity_text is not None:
                immunity = _immunity_ms(immunity_text, timeout_ms)
                if age < immunity and await self._check_prepare_queue_offset(
                        removed, done_op, msg):
                    new_offset = i = i + 1
                    continue
            elif 0 <= age < immunity:
                break  # too young: so is everything after it
            ops = pull.msg_found_list
            if (ops is None and age > immunity) or age <= -1 or \
                    (ops is not None and ops[-1].born_timestamp - start > timeout_ms):
                if not await self._put_back_half_msg_queue(msg):
                    break
                listener.resolve_half_msg(msg)
            elif ops is None:
                break  # not due yet and no op record left to read
            else:
                pull = self._fill_op_remove_map(removed, queue_id, pull.next_begin_offset,
                                                half_offset, done_op)
                if pull is None:
                    break
                continue
            new_offset = i = i + 1
        if new_offset != half_offset:
            bridge.update_consume_offset(HALF_TOPIC, queue_id, new_offset)
        new_op_offset = _calculate_op_offset(done_op, op_offset)
        if new_op_offset != op_offset:
            bridge.update_consume_offset(OP_TOPIC, queue_id, new_op_offset)

    def _fill_op_remove_map(self, removed: dict[int, int], queue_id: int, op_offset: int,
                            min_half_offset: int, done_op: list[int]) -> PullResult | None:
        """Read up to 32 op records: each names a finished half offset; one
        below ``min_half_offset`` is already behind the walk, so its op record
        counts as consumed at once."""
        pull = self.bridge.get_op_message(queue_id, op_offset, OP_PULL_NUMS)
        if pull is None:
            return None
        if pull.status in (PullStatus.OFFSET_ILLEGAL, PullStatus.NO_MATCHED_MSG):
            log.warning("The miss op offset=%d in queue=%d is illegal, pullResult=%s",
                        op_offset, queue_id, pull.status.name)
            self.bridge.update_consume_offset(OP_TOPIC, queue_id, pull.next_begin_offset)
            return pull
        if pull.msg_found_list is None:
            return pull
        for op in pull.msg_found_list:
            half_offset = _java_long(op.body.decode("utf-8", "replace"))
            if op.tags == REMOVE_TAG:
                if half_offset < min_half_offset:
                    done_op.append(op.queue_offset)
                else:
                    removed[half_offset] = op.queue_offset
            else:
                log.error("Found a illegal tag in opMessageExt= %s", op.msg_id)
        return pull

    async def _check_prepare_queue_offset(self, removed: dict[int, int], done_op: list[int],
                                          msg: MessageExt) -> bool:
        """A half message inside its immunity time: finished if an op record
        names its first copy's offset, else put back again (True when done
        with it either way)."""
        text = msg.properties.get(mc.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET)
        if text is None:
            return await self.bridge.put_message(renew_immunity_half_message_inner(msg))
        prepared = _java_long(text)
        if prepared == -1:
            return False
        if prepared in removed:
            done_op.append(removed.pop(prepared))
            return True
        return await self.bridge.put_message(renew_immunity_half_message_inner(msg))

    @staticmethod
    def _need_discard(msg: MessageExt, check_max: int) -> bool:
        """Checked ``check_max`` times already?  Otherwise count this check in
        the message's properties (the first check makes it 1)."""
        text = msg.properties.get(mc.PROPERTY_TRANSACTION_CHECK_TIMES)
        times = 1
        if text is not None:
            times = _java_long(text)
            if times >= check_max:
                return True
            times += 1
        msg.properties[mc.PROPERTY_TRANSACTION_CHECK_TIMES] = str(times)
        return False

    def _need_skip(self, msg: MessageExt) -> bool:
        if _now_ms() - msg.born_timestamp > self.file_reserved_hours() * 3600 * 1000:
            log.info("Half message exceed file reserved time ,so skip it.messageId %s,"
                     "bornTime %d", msg.msg_id, msg.born_timestamp)
            return True
        return False

    async def _put_back_half_msg_queue(self, msg: MessageExt) -> bool:
        """Append a copy of ``msg`` to the half queue; ``msg`` then carries the
        copy's offsets and offset id (what the check request names)."""
        result = await self.bridge.put_message_return_result(renew_half_message_inner(msg))
        if result is None or result.status is not PutMessageStatus.PUT_OK:
            log.error("PutBackToHalfQueueReturnResult write failed, topic: %s, queueId: %d, "
                      "msgId: %s", msg.topic, msg.queue_id, msg.msg_id)
            return False
        ar = result.append_result
        msg.queue_offset = ar.logics_offset
        msg.commit_log_offset = ar.wrote_offset
        msg.msg_id = ar.msg_id
        return True


def _immunity_ms(text: str, timeout_ms: int) -> int:
    seconds = _java_long(text)
    return timeout_ms if seconds == -1 else seconds * 1000


def _calculate_op_offset(done: list[int], old_offset: int) -> int:
    """The op offset after the contiguous run of consumed op records."""
    done.sort()
    offset = old_offset
    for value in done:
        if value != offset:
            break
        offset += 1
    return offset
