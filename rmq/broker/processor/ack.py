"""ACK_MESSAGE, BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME as RocketMQ
5.3.3 serves them.

An ack is an ack record in the revive queue its handle names (reviveQid); the
revive service crosses the offset off its checkpoint.  Like 5.3.3, an ack that
matches no checkpoint is answered SUCCESS (the answer says the record was
stored, not that it mattered).  An orderly handle (reviveQid 999) acks in the
order-info state and moves the group's offset once the batch is done.

CHANGE_MESSAGE_INVISIBLETIME writes a new checkpoint for the one message
(startOffset = its offset, popTime = now) *before* the ack of the old one, so
that a crash between the two can only deliver it again, never lose it; the
answer's popTime / invisibleTime / reviveQid make the new handle, and an ack
with that handle sticks.
"""

from __future__ import annotations

import binascii
import time
from typing import Any

from rmq._fast import compiled
from rmq.broker.pop_context import pop_context
from rmq.broker.pop_records import (
    ORDER_REVIVE_QUEUE,
    AckMsg,
    ExtraInfo,
    PopCheckPoint,
    real_topic,
)
from rmq.broker.processor.pop import ext_int, ext_str, response
from rmq.common import fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.eager import run_eagerly
from rmq.remoting import Channel, RemotingCommand

RC = ResponseCode


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# the bits set in each byte value, lowest first (BitSet.valueOf's order)
_BITS = tuple(tuple(bit for bit in range(8) if byte >> bit & 1) for byte in range(256))


def bitset_offsets(start: int, data: str) -> list[int]:
    """``BitSet.valueOf(bytes)`` of the base64 text: the offsets whose bit is set
    (``a2b_base64`` is what ``b64decode`` runs, without its argument checks)."""
    raw = binascii.a2b_base64(data) if data else b""
    bits = int.from_bytes(raw, "little")  # bit k of the set is bit k of the number
    if bits & (bits + 1) == 0:  # bits 0..n-1 (a whole batch acked at once): a range
        return list(range(start, start + bits.bit_length()))
    return [start + i * 8 + bit for i, byte in enumerate(raw) if byte for bit in _BITS[byte]]


class AckMessageProcessor:
    def __init__(self, controller: Any) -> None:
        self.c = controller
        self.bc = controller.broker_config
        self.store = controller.message_store
        self.ctx = pop_context(controller)
        # held here, not reached through the controller and the context, for
        # the ack of each entry (the compiled one reads them too)
        self.topics = controller.topic_config_manager
        self.revive = self.ctx.revive

    def process_request(self, channel: Channel, request: RemotingCommand) -> Any:
        if request.code == RequestCode.BATCH_ACK_MESSAGE:
            return run_eagerly(self.batch_ack(request))
        if request.code == RequestCode.CHANGE_MESSAGE_INVISIBLETIME:
            return run_eagerly(self.change_invisible(request))
        return run_eagerly(self.ack(request))

    def _check_queue(self, topic: str, queue_id: int, offset: int | None
                     ) -> RemotingCommand | None:
        tc = self.topics.select_topic_config(topic)
        if tc is None:
            return response(RC.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        if queue_id < 0 or queue_id >= tc.readQueueNums:
            return response(RC.MESSAGE_ILLEGAL, f"queueId[{queue_id}] is illegal, topic:"
                            f"[{topic}] topicConfig.readQueueNums:[{tc.readQueueNums}]")
        if offset is not None:
            low = self.store.get_min_offset_in_queue(topic, queue_id)
            high = self.store.get_max_offset_in_queue(topic, queue_id)
            if offset < low or offset > high:
                return response(RC.NO_MESSAGE, f"offset is illegal, key:{topic}@{queue_id}, "
                                f"commit:{offset}, store:{low},{high}")
        return None

    def _order_ack(self, group: str, topic: str, queue_id: int, offset: int,
                   pop_time: int) -> None:
        commit = self.ctx.order.ack((topic, group, queue_id), offset, pop_time)
        if commit is not None:
            self.c.consumer_offset_manager.commit_offset("ack", group, topic, queue_id, commit)
            self.ctx.polling.notify(topic)

    async def _ack_offsets(self, group: str, topic: str, queue_id: int, info: ExtraInfo,
                           offsets: list[int]) -> bool:
        if info.revive_qid == ORDER_REVIVE_QUEUE:
            for o in offsets:
                self._order_ack(group, topic, queue_id, o, info.pop_time)
            await self.ctx.persist_order()  # acked stays acked after a SIGKILL
            return True
        if not 0 <= info.revive_qid < self.revive.queue_num:
            return True  # a handle of no revive queue of ours: nothing to cross off
        ack = AckMsg(topic, group, queue_id, info.ck_offset, info.pop_time, info.broker_name,
                     offsets)
        revive = self.revive
        stored = revive.write_now(info.revive_qid, ack)
        return stored if stored is not None else await revive.write(info.revive_qid, ack)

    # ---- ACK_MESSAGE --------------------------------------------------------------
    async def ack(self, request: RemotingCommand) -> RemotingCommand:
        return response(*await self.ack_answer(request.ext_fields or {}))

    async def ack_answer(self, ext: dict[str, str]) -> tuple[int, str | None]:
        """Serve an ACK_MESSAGE header: (code, remark) of its answer."""
        try:
            group, topic = ext_str(ext, "consumerGroup"), ext_str(ext, "topic")
            queue_id, offset = ext_int(ext, "queueId"), ext_int(ext, "offset")
            info = ExtraInfo.parse(ext.get("extraInfo"))
        except ValueError as exc:
            return RC.SYSTEM_ERROR, str(exc)
        refused = self._check_queue(topic, queue_id, offset)
        if refused is not None:
            return refused.code, refused.remark
        if not await self._ack_offsets(group, topic, queue_id, info, [offset]):
            return RC.SYSTEM_ERROR, "put ack msg error"
        return RC.SUCCESS, None

    # ---- BATCH_ACK_MESSAGE -----------------------------------------------------------
    async def batch_ack(self, request: RemotingCommand) -> RemotingCommand:
        got = self.batch_ack_now(request.body or b"")
        return response(*(got if type(got) is tuple else await got))

    def batch_ack_now(self, body: Any) -> Any:
        """Serve a BATCH_ACK_MESSAGE body: (code, remark) of its answer when
        every entry is done at once, without a coroutine; else a coroutine
        that goes on from the first entry whose ack record must wait for the
        store (or that acks an orderly pop) and completes with the answer."""
        read = None if read_batch_ack is None else read_batch_ack(body)
        if read is None:  # not built, or a body the compiled reader leaves to this one
            try:
                obj = fastjson.loads(bytes(body))
                acks = obj.get("acks") or []
                if not isinstance(acks, list):
                    raise ValueError("acks is not a list")
            except (ValueError, AttributeError, fastjson.FastjsonError) as exc:
                return RC.SYSTEM_ERROR, f"bad batch ack body: {exc}"
            broker_name = obj.get("brokerName")
        else:
            broker_name, acks = read
        broker_name = broker_name or self.bc.brokerName
        for i, a in enumerate(acks):
            got = ack_entry_now(self, a, broker_name)
            if got is None:
                continue
            if len(got) == 2:
                return got
            return self._batch_ack_rest(got, acks, i + 1, broker_name)
        return RC.SUCCESS, None

    async def _batch_ack_rest(self, got: tuple, acks: list, i: int, broker_name: str
                              ) -> tuple[int, str | None]:
        """``batch_ack_now`` from an entry handed back (``got``, the arguments
        of ``_ack_offsets``) and the entries after it, ``acks[i:]``."""
        while True:
            if not await self._ack_offsets(*got):
                return RC.SYSTEM_ERROR, "put ack msg error"
            while i < len(acks):
                got = ack_entry_now(self, acks[i], broker_name)
                i += 1
                if got is not None:
                    break
            else:
                return RC.SUCCESS, None
            if len(got) == 2:
                return got

    # ---- CHANGE_MESSAGE_INVISIBLETIME -------------------------------------------------
    async def change_invisible(self, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields or {}
        try:
            group, topic = ext_str(ext, "consumerGroup"), ext_str(ext, "topic")
            queue_id, offset = ext_int(ext, "queueId"), ext_int(ext, "offset")
            invisible = ext_int(ext, "invisibleTime")
            info = ExtraInfo.parse(ext.get("extraInfo"))
        except ValueError as exc:
            return response(RC.SYSTEM_ERROR, str(exc))
        refused = self._check_queue(topic, queue_id, offset)
        if refused is not None:
            return refused
        now = now_ms()
        if info.revive_qid == ORDER_REVIVE_QUEUE:
            # 5.3.3: the handle keeps its popTime, its invisibleTime grows to
            # reach the new visible time (ChangeInvisibleTimeProcessor, order)
            visible_at = now + invisible
            if self.ctx.order.change_invisible((topic, group, queue_id), offset, info.pop_time,
                                               visible_at):
                await self.ctx.persist_order()
            return response(RC.SUCCESS, None, {"popTime": str(info.pop_time),
                                               "invisibleTime": str(visible_at - info.pop_time),
                                               "reviveQid": str(ORDER_REVIVE_QUEUE)})
        qid = info.revive_qid if 0 <= info.revive_qid < self.revive.queue_num \
            else self.ctx.next_revive_qid()
        ck = PopCheckPoint(topic, group, queue_id, offset, now, invisible, [0],
                           self.bc.brokerName)
        if not await self.revive.write(qid, ck):
            return response(RC.SYSTEM_ERROR, "put ck msg error")
        await self._ack_offsets(group, topic, queue_id, info, [offset])
        return response(RC.SUCCESS, None, {"popTime": str(now), "invisibleTime": str(invisible),
                                           "reviveQid": str(qid)})


def entry_fields(a: Any) -> tuple:
    """One BATCH_ACK_MESSAGE entry (BatchAck: c, r, t, q, so, pt, it, rq, b) as
    the general JSON reader gives it, read to ``(group, retry, topic, queue
    id, start offset, pop time, invisible time, revive queue id, bitset
    text)``; raises KeyError, ValueError or TypeError for a field missing or
    of no use.  ``rmq._fast.ack_entry.read_batch_ack`` reads a plain body
    straight to these tuples."""
    return (str(a["c"]), str(a.get("r", "0")), str(a["t"]), int(a["q"]), int(a["so"]),
            int(a["pt"]), int(a.get("it", 0)), int(a["rq"]), a.get("b") or "")


def _ack_entry_now(p: AckMessageProcessor, a: Any, broker_name: str) -> tuple | None:
    """One entry of a BATCH_ACK_MESSAGE served without a coroutine: None once
    done (its ack record stored and applied, or nothing to store), ``(code,
    remark)`` of the answer when the entry is refused, or the arguments of
    ``_ack_offsets`` (nothing done yet) when its record must wait for the
    store or it acks an orderly pop.  ``a`` is the general reader's object
    or the tuple ``entry_fields`` makes of it.  The twin of
    ``rmq._fast.ack_entry.ack_entry_now``."""
    try:
        if type(a) is not tuple:
            a = entry_fields(a)
        group, retry, raw_topic, queue_id, start, pop_time, invisible, qid, data = a
        topic = real_topic(raw_topic, group, retry)
        info = ExtraInfo(start, pop_time, invisible, qid, retry, broker_name, queue_id, start)
        offsets = bitset_offsets(start, data)
    except (KeyError, ValueError, TypeError) as exc:
        return RC.SYSTEM_ERROR, f"bad batch ack entry: {exc}"
    refused = p._check_queue(topic, queue_id, None)
    if refused is not None:
        return refused.code, refused.remark
    if not offsets:
        return None
    revive = p.revive
    if info.revive_qid == ORDER_REVIVE_QUEUE:
        return group, topic, queue_id, info, offsets
    if not 0 <= info.revive_qid < revive.queue_num:
        return None  # a handle of no revive queue of ours: nothing to cross off
    ack = AckMsg(topic, group, queue_id, start, info.pop_time, broker_name, offsets)
    if revive.write_now(info.revive_qid, ack) is None:
        return group, topic, queue_id, info, offsets
    return None


def _batch_ack_now(p: AckMessageProcessor, body: Any) -> Any:
    """``p.batch_ack_now(body)``: the pop lane's call.  The twin of
    ``rmq._fast.ack_entry.batch_ack_now``, which serves a body its reader
    takes in one call and hands any other to the method."""
    return p.batch_ack_now(body)


ack_entry_now = _ack_entry_now
batch_ack_now = _batch_ack_now
read_batch_ack = None  # the compiled body reader; without it the general reader reads all
_c = compiled("ack_entry")
if _c is not None:
    _c.bind(ExtraInfo, real_topic, RC.SYSTEM_ERROR, ORDER_REVIVE_QUEUE, RC.SUCCESS)
    ack_entry_now = _c.ack_entry_now
    batch_ack_now = _c.batch_ack_now
    read_batch_ack = _c.read_batch_ack
