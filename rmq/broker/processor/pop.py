"""POP_MESSAGE, PEEK_MESSAGE, NOTIFICATION and POLLING_INFO as RocketMQ 5.3.3
serves them (../shared/spec/ROCKETMQ5_POP_TIMER.md).

A pop reads the group's next messages of one queue or of every queue
(queueId -1), from the group's pop retry topic first with
``popFromRetryProbability`` percent, writes one checkpoint per queue read to
the revive topic, moves the group's offset past what it read and answers the
stored records with ``startOffsetInfo`` / ``msgOffsetInfo`` for the client to
build each message's receipt handle.  Redeliveries (read from the retry
topic) carry their handle in the ``POP_CK`` property and their original
topic.  A group with ``consumeMessageOrderly`` (or an ``order`` pop) writes no
checkpoint: the queue is blocked until the batch is acked (reviveQid 999).
Nothing to return is 210 POLLING_TIMEOUT ``NO_MESSAGE_IN_QUEUE``, after
waiting up to pollTime for a message.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from rmq._fast import compiled
from rmq.broker.config import BrokerConfig
from rmq.broker.pop_context import PopContext, pop_context
from rmq.broker.pop_polling import PopPolling
from rmq.broker.pop_records import (
    ORDER_REVIVE_QUEUE,
    PROPERTY_POP_CK,
    ExtraInfo,
    PopCheckPoint,
    append_info,
    order_offset_key,
    retry_flag,
    retry_topic_v1,
    retry_topic_v2,
)
from rmq.broker.processor.pull import tag_filter
from rmq.broker.stats import BrokerStats
from rmq.broker.subscription_group_manager import SubscriptionGroupConfig
from rmq.client.heartbeat import EXPRESSION_TAG, build_subscription
from rmq.common import message as mc
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.eager import run_eagerly
from rmq.common.get_message_status import GetMessageStatus
from rmq.common.topic_config import TopicConfig
from rmq.common.topics import RETRY_GROUP_TOPIC_PREFIX
from rmq.filter.message_filter import filter_result
from rmq.remoting import Channel, RemotingCommand
from rmq.store.consume_queue import CQ_STORE_UNIT_SIZE, ConsumeQueue
from rmq.store.default_message_store import DefaultMessageStore
from rmq.store.message_codec import decode_message, encode_message
from rmq.store.results import GetMessageResult

RC = ResponseCode
MAX_POP_NUMS = 32
BORN_TIME_SLACK_MS = 500
INIT_MODE_MAX = 1  # ConsumeInitMode.MAX (MIN is 0)
FOUND = GetMessageStatus.FOUND


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def response(code: int, remark: str | None = None, ext: dict[str, str] | None = None,
             body: Any = None) -> RemotingCommand:
    r = RemotingCommand.create_response(code, remark)
    if ext:
        r.ext_fields = ext
    if body is not None:
        r.body = body
    return r


def join_ints(values: list[int]) -> str:
    """``1,2,3``: what ``",".join(map(str, values))`` gives, written by orjson
    (a JSON array of ints without its brackets), ten times faster for a pop's 32."""
    return orjson.dumps(values)[1:-1].decode()


class HeaderError(ValueError):
    pass


def ext_int(ext: dict[str, str], name: str, default: int | None = None) -> int:
    value = ext.get(name)
    if value is None:
        if default is None:
            raise HeaderError(f"the custom field {name} is null")
        return default
    try:
        return int(value)
    except ValueError:
        raise HeaderError(f"the custom field {name} is not a number: {value}") from None


def ext_str(ext: dict[str, str], name: str) -> str:
    value = ext.get(name)
    if not value:
        raise HeaderError(f"the custom field {name} is null")
    return value


def ext_bool(ext: dict[str, str], name: str) -> bool:
    return str(ext.get(name, "false")).lower() == "true"


def _pop_header(ext: dict[str, str]) -> tuple | str:
    """``(group, topic, queueId, maxMsgNums, invisibleTime, pollTime,
    bornTime, initMode, order, expType, exp)`` of a POP_MESSAGE's extFields,
    or the remark of the SYSTEM_ERROR answer to the first missing or
    unreadable one.  The twin of ``rmq._fast.pop_header.pop_header``."""
    try:
        return (ext_str(ext, "consumerGroup"), ext_str(ext, "topic"), ext_int(ext, "queueId"),
                ext_int(ext, "maxMsgNums"), ext_int(ext, "invisibleTime"),
                ext_int(ext, "pollTime", 0), ext_int(ext, "bornTime", 0),
                ext_int(ext, "initMode", 0), ext_bool(ext, "order"), ext.get("expType"),
                ext.get("exp"))
    except HeaderError as exc:
        return str(exc)


pop_header = _pop_header
_c_header = compiled("pop_header")
if _c_header is not None:
    pop_header = _c_header.pop_header


@dataclass(slots=True)
class PopResult:
    """What one pop collected, queue after queue; once answered (``_answer``)
    also the answer's header values, kept as values so that the pop lane
    writes the header straight from them (``rmq.broker.pop_lane.frame``)
    and only the general path makes the extFields dict (``ext_fields``)."""

    bodies: list[Any] = field(default_factory=list)  # runs of records (views or bytes)
    count: int = 0
    start_info: list[str] = field(default_factory=list)
    msg_info: list[str] = field(default_factory=list)
    order_info: list[str] = field(default_factory=list)
    rest: int = 0
    size: int = 0  # bytes of the records answered
    pop_time: int = 0
    invisible: int = 0
    revive_qid: int = 0
    orderly: bool = False

    def ext_fields(self) -> dict[str, str]:
        """The answer's extFields, in the order the general path writes them."""
        ext = {"popTime": str(self.pop_time), "invisibleTime": str(self.invisible),
               "reviveQid": str(self.revive_qid), "restNum": str(self.rest),
               "startOffsetInfo": ";".join(self.start_info),
               "msgOffsetInfo": ";".join(self.msg_info)}
        if self.orderly:
            ext["orderCountInfo"] = ";".join(self.order_info)
        return ext


def answer_ext(ext: Any) -> dict[str, str] | None:
    """The extFields of a ``pop_answer_now`` answer's third value (a
    ``PopResult`` for a pop that found messages, else the dict or None)."""
    return ext.ext_fields() if type(ext) is PopResult else ext


@dataclass(slots=True)
class PopRequest:
    """A POP_MESSAGE request read and checked (``PopMessageProcessor.read_pop``)."""

    group: str
    topic: str
    queue_id: int
    max_nums: int
    invisible: int
    poll_time: int
    init_mode: int
    orderly: bool
    matches: Any
    record_filter: Any


class PopMessageProcessor:
    # plain slots: the compiled pop reads them at their offsets (``bind_holders``)
    __slots__ = ("c", "bc", "store", "com", "tcm", "sgm", "stats", "ctx", "_filter_cache",
                 "_retry_names")

    def __init__(self, controller: Any) -> None:
        self.c = controller
        self.bc = controller.broker_config
        self.store = controller.message_store
        # the controller's managers, made with it and kept for its life
        self.com = controller.consumer_offset_manager
        self.tcm = controller.topic_config_manager
        self.sgm = controller.subscription_group_manager
        self.stats = controller.stats
        self.ctx = pop_context(controller)
        self._filter_cache: dict[tuple, tuple] = {}
        self._retry_names: dict[tuple[str, str], tuple[str, str]] = {}

    def process_request(self, channel: Channel, request: RemotingCommand) -> Any:
        self.ctx.revive.ensure_loaded()
        code = request.code
        if code == RequestCode.POP_MESSAGE:
            return run_eagerly(self.pop(channel, request))
        if code == RequestCode.PEEK_MESSAGE:
            return self.peek(channel, request)
        if code == RequestCode.NOTIFICATION:
            return self.notification(channel, request)
        return self.polling_info(channel, request)

    # ---- checks shared by the requests ----------------------------------------------
    def _check(self, channel: Channel, group: str, topic: str, queue_id: int
               ) -> RemotingCommand | None:
        if not mc.is_readable(self.bc.brokerPermission):
            return response(RC.NO_PERMISSION,
                            f"the broker[{self.bc.brokerIP1}] popping message is forbidden")
        tc = self.tcm.select_topic_config(topic)
        if tc is None:
            return response(RC.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        if not mc.is_readable(tc.perm):
            return response(RC.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden")
        if queue_id >= tc.readQueueNums or queue_id < -1:
            return response(RC.INVALID_PARAMETER, f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                            f"topicConfig.readQueueNums:[{tc.readQueueNums}] "
                            f"consumer:[/{channel.remote_addr}]")
        cfg = self.sgm.find_subscription_group_config(group)
        if cfg is None:
            return response(RC.SUBSCRIPTION_GROUP_NOT_EXIST,
                            f"subscription group [{group}] does not exist")
        if not cfg.consumeEnable:
            return response(RC.NO_PERMISSION, f"subscription group no permission, {group}")
        return None

    def _filters(self, group: str, topic: str, exp_type: str | None, exp: str | None):
        key = (group, topic, exp_type, exp)
        cached = self._filter_cache.get(key)
        if cached is None:
            if len(self._filter_cache) > 4096:
                self._filter_cache.clear()
            cached = self._filter_cache[key] = self._build_filters(group, topic, exp_type, exp)
        return cached

    def _build_filters(self, group: str, topic: str, exp_type: str | None, exp: str | None):
        sub = build_subscription(topic, exp or "*", exp_type or EXPRESSION_TAG)
        record_filter = None
        if sub.expression_type != EXPRESSION_TAG:
            if not self.bc.enablePropertyFilter:
                raise HeaderError("The broker does not support consumer to filter message by "
                                  + sub.expression_type)
            refusal, record_filter = self.c.consumer_filter_manager.pull_filter(
                topic, group, sub, True, 0)
            if refusal is not None:
                raise HeaderError(refusal[1])
        return tag_filter(sub), record_filter

    def _queue_ids(self, topic: str, queue_id: int) -> list[int]:
        if queue_id >= 0:
            return [queue_id]
        tc = self.tcm.select_topic_config(topic)
        n = tc.readQueueNums if tc is not None else 0
        start = int(random.random() * n)  # (randrange's uniform start, a third of its cost)
        return [*range(start, n), *range(start)]

    def _start_offset(self, group: str, topic: str, queue_id: int, init_mode: int) -> int:
        offset = self.com.query_offset(group, topic, queue_id)
        if offset < 0:
            offset = self._init_offset(group, topic, queue_id, init_mode)
        return max(offset, self.store.get_min_offset_in_queue(topic, queue_id), 0)

    def _init_offset(self, group: str, topic: str, queue_id: int, init_mode: int) -> int:
        """Where a group's first pop of a queue starts, saved at once so that the
        next pop goes on from there: with ConsumeInitMode MAX (1) a start recomputed
        on every pop would skip what was sent in between.  5.3.3's rule: MIN (0)
        and the retry topics start at the queue's min offset; MAX starts at 0 while
        the queue still holds its first message in memory, else at its last one."""
        store = self.store
        if init_mode != 1 or topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            offset = store.get_min_offset_in_queue(topic, queue_id)
        elif (self.bc.initPopOffsetByCheckMsgInMem
              and store.get_min_offset_in_queue(topic, queue_id) <= 0
              and store.get_max_offset_in_queue(topic, queue_id) > 0
              and not store.check_in_disk_by_consume_offset(topic, queue_id, 0)):
            offset = 0
        else:
            offset = max(store.get_max_offset_in_queue(topic, queue_id) - 1, 0)
        offset = max(offset, 0)
        self.com.commit_offset("getPopOffset", group, topic, queue_id,
                                                     offset)
        return offset

    def retry_topics(self, group: str, topic: str) -> list[str]:
        """The group's pop retry topics of ``topic`` that exist (v1, v2): their
        names made once per (group, topic), every pop asks."""
        key = (group, topic)
        names = self._retry_names.get(key)
        if names is None:
            if len(self._retry_names) > 4096:
                self._retry_names.clear()
            names = self._retry_names[key] = (retry_topic_v1(topic, group),
                                              retry_topic_v2(topic, group))
        select = self.tcm.select_topic_config
        v1, v2 = names
        out = []
        if select(v1) is not None:
            out.append(v1)
        if select(v2) is not None:
            out.append(v2)
        return out

    @staticmethod
    def wait_topics(group: str, topic: str) -> list[str]:
        """What a held pop waits on: the topic and both retry topics (which may
        not exist yet: a revive creates them)."""
        return [topic, retry_topic_v1(topic, group), retry_topic_v2(topic, group)]

    # ---- POP_MESSAGE ------------------------------------------------------------
    async def pop(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        req = self.read_pop(channel, request.ext_fields or {})
        if type(req) is not PopRequest:
            return req
        got = self.pop_answer_now(channel, req)
        if type(got) is not tuple:
            got = await got
        code, remark, ext_out, bodies, _size = got
        return response(code, remark, answer_ext(ext_out), bodies)

    def read_pop(self, channel: Channel, ext: dict[str, str]) -> PopRequest | RemotingCommand:
        """A POP_MESSAGE header read and checked: the request to serve, or the
        refusal to answer.  Nothing is changed here, so the pop lane can read a
        request and leave it to this path again."""
        got = pop_header(ext)
        if type(got) is str:
            return response(RC.SYSTEM_ERROR, got)
        (group, topic, queue_id, max_nums, invisible, poll_time, born_time, init_mode, order,
         exp_type, exp) = got
        refused = self._check(channel, group, topic, queue_id)
        if refused is not None:
            return refused
        if max_nums > MAX_POP_NUMS or max_nums <= 0:
            code = RC.INVALID_PARAMETER if max_nums > MAX_POP_NUMS else RC.SYSTEM_ERROR
            return response(code, f"the broker[{self.bc.brokerIP1}] pop message's "
                            f"num is greater than {MAX_POP_NUMS}")
        if invisible <= 0:
            return response(RC.SYSTEM_ERROR, f"invisibleTime is illegal: {invisible}")
        if born_time > 0 and now_ms() - born_time - poll_time > BORN_TIME_SLACK_MS:
            return response(RC.POLLING_TIMEOUT, "poll time out")
        try:
            matches, record_filter = self._filters(group, topic, exp_type, exp)
        except (HeaderError, ValueError) as exc:
            return response(RC.SUBSCRIPTION_PARSE_FAILED, str(exc))
        orderly = order or \
            self.sgm.find_subscription_group_config(group) \
            .consumeMessageOrderly
        return PopRequest(group, topic, queue_id, max_nums, invisible, poll_time, init_mode,
                          orderly, matches, record_filter)

    def may_find(self, req: PopRequest) -> bool:
        """Whether a queue the pop reads holds messages past the group's offset
        (or has no offset yet): read without changing anything, so that the pop
        lane leaves a pop that would wait (long polling) to this path whole."""
        group, topic = req.group, req.topic
        if req.queue_id >= 0:
            if self._unread(group, topic, (req.queue_id,)):
                return True
        elif self._unread(group, topic, None):
            return True
        return self._unread(group, retry_topic_v1(topic, group), None) or \
            self._unread(group, retry_topic_v2(topic, group), None)

    def _unread(self, group: str, topic: str, qids: Any) -> bool:
        """Whether one of the queues ``qids`` (None: all the topic's) holds
        messages past the group's offset or has no offset yet."""
        if qids is None:
            tc = self.tcm.select_topic_config(topic)
            if tc is None:
                return False
            qids = range(tc.readQueueNums)
        com, store = self.com, self.store
        for qid in qids:
            offset = com.query_offset(group, topic, qid)
            if offset < 0 or offset < store.get_max_offset_in_queue(topic, qid):
                return True
        return False

    def pop_answer_now(self, channel: Channel, req: PopRequest) -> Any:
        """Serve a checked pop: (code, remark, extFields, body, body bytes) of
        its answer (the body a list of records, or None; the extFields a
        ``PopResult`` when it found messages, see ``answer_ext``) when it is answered at
        once -- it finds messages, or finds none and has no pollTime to wait --
        without a coroutine; else a coroutine that goes on from where the pop
        stopped (a queue's checkpoint record waiting for the store, a wait for
        messages, an orderly pop's state saved) and completes with the answer."""
        deadline = time.monotonic() + req.poll_time / 1000
        got = self._pop_once_now(req)
        if type(got) is tuple and not req.orderly:
            if got[0].count:
                return self._answer(req, *got)
            if req.poll_time <= 0:  # the deadline has passed: no wait
                return RC.POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE", None, None, 0
        return self._pop_answer_rest(channel, req, deadline, got)

    async def _pop_answer_rest(self, channel: Channel, req: PopRequest, deadline: float,
                               got: Any) -> tuple[int, str | None, Any, Any, int]:
        """``pop_answer_now`` from its first try ``got`` (what ``_pop_once_now``
        returned): tries again as messages arrive until the deadline."""
        while True:
            if type(got) is not tuple:
                got = await got
            if got[0].count:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not channel.is_active():
                return RC.POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE", None, None, 0
            if self.ctx.polling.full():
                return RC.POLLING_FULL, "polling full", None, None, 0
            await self.ctx.polling.wait(self.wait_topics(req.group, req.topic), remaining)
            got = self._pop_once_now(req)
        if req.orderly:  # the queue stays blocked across a restart
            await self.ctx.persist_order()
        return self._answer(req, *got)

    def _answer(self, req: PopRequest, out: PopResult, pop_time: int, revive_qid: int
                ) -> tuple[int, None, PopResult, list, int]:
        """The answer of a pop that found ``out``, its statistics counted: its
        extFields are ``out``'s header values (``answer_ext``)."""
        out.pop_time = pop_time
        out.invisible = req.invisible
        out.revive_qid = revive_qid
        out.orderly = req.orderly
        self.stats.inc_get(req.group, req.topic, max(req.queue_id, 0), out.count, out.size,
                             0, False)
        return RC.SUCCESS, None, out, out.bodies, out.size

    def _pop_once_now(self, req: PopRequest) -> Any:
        """One try of a pop over its queues (the retry topics first with
        popFromRetryProbability percent): ``(result, pop time, revive queue
        id)``, or, when a queue's checkpoint record must wait for the store, a
        coroutine that writes it, reads the queues after it and completes
        with them."""
        out = PopResult()
        pop_time = now_ms()
        orderly = req.orderly
        revive_qid = ORDER_REVIVE_QUEUE if orderly else self.ctx.next_revive_qid()
        retry = [] if orderly else self.retry_topics(req.group, req.topic)
        retry_first = bool(retry) and random.randrange(100) < self.bc.popFromRetryProbability
        order = ([*retry, req.topic] if retry_first else [req.topic, *retry])
        later = self._pop_queues(req, out, pop_time, revive_qid, order, 0, None, 0)
        return (out, pop_time, revive_qid) if later is None else later

    def _pop_queues(self, req: PopRequest, out: PopResult, pop_time: int, revive_qid: int,
                    order: list[str], ti: int, qids: list[int] | None, qi: int) -> Any:
        """The queues of the topics ``order`` read into ``out``, from topic
        ``ti``'s queue ``qi`` on (``qids``: that topic's queue ids, None to pick
        them): None once done, or the coroutine that finishes them when a
        queue's checkpoint record must wait for the store."""
        group, topic, max_nums = req.group, req.topic, req.max_nums
        while ti < len(order):
            t = order[ti]
            if qids is None:
                qids = self._queue_ids(t, req.queue_id if t == topic else -1)
            while qi < len(qids) and out.count < max_nums:
                qid = qids[qi]
                qi += 1
                staged = pop_queue_now(self, out, group, topic, t, qid, max_nums - out.count,
                                       pop_time, req.invisible, revive_qid, req.init_mode,
                                       req.orderly, req.matches, req.record_filter)
                if staged is not None:
                    return self._pop_queues_later(req, out, pop_time, revive_qid, staged,
                                                  order, ti, qids, qi)
            ti += 1
            qids = None
            qi = 0
        return None

    async def _pop_queues_later(self, req: PopRequest, out: PopResult, pop_time: int,
                                revive_qid: int, staged: tuple, order: list[str], ti: int,
                                qids: list[int], qi: int) -> tuple[PopResult, int, int]:
        await self._pop_queue_later(out, req.group, req.topic, staged, pop_time, req.invisible,
                                    revive_qid)
        later = self._pop_queues(req, out, pop_time, revive_qid, order, ti, qids, qi)
        return (out, pop_time, revive_qid) if later is None else await later

    async def _pop_queue_later(self, out: PopResult, group: str, topic: str, staged: tuple,
                               pop_time: int, invisible: int, revive_qid: int) -> None:
        """A queue ``pop_queue_now`` read whose checkpoint's record must wait
        for the store (the general put, a group commit): the record written,
        then the read handed out as ``pop_queue_now`` would have (the queue
        stays locked until then)."""
        key, ck, result, offsets, next_offset, buffers, offset = staged
        read_topic, _group, qid = key
        try:
            stored = await self.ctx.revive.write(revive_qid, ck)
            pop_queue_tail(self, out, group, topic, read_topic, qid, offset, offsets,
                           next_offset, buffers, result, stored, True, pop_time, invisible,
                           revive_qid)
        finally:
            self.ctx.locks.discard(key)

    def _as_original(self, record: bytes, topic: str, ck_offset: int, pop_time: int,
                     invisible: int, revive_qid: int, read_topic: str) -> bytes:
        """A retry-topic record as 5.3.3 answers it (popResponseReturnActualRetryTopic
        false): its POP_CK property set and its topic the original one."""
        msg = decode_message(record)
        handle = ExtraInfo(ck_offset, pop_time, invisible, revive_qid, retry_flag(read_topic),
                           self.bc.brokerName, msg.queue_id, msg.queue_offset)
        msg.properties[PROPERTY_POP_CK] = handle.text()
        if not self.bc.popResponseReturnActualRetryTopic:
            msg.topic = topic
        return encode_message(msg)

    # ---- PEEK_MESSAGE -----------------------------------------------------------
    def peek(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields or {}
        try:
            group, topic = ext_str(ext, "consumerGroup"), ext_str(ext, "topic")
            queue_id, max_nums = ext_int(ext, "queueId"), ext_int(ext, "maxMsgNums")
        except HeaderError as exc:
            return response(RC.SYSTEM_ERROR, str(exc))
        refused = self._check(channel, group, topic, queue_id)
        if refused is not None:
            return refused
        bodies: list[bytes] = []
        rest = 0
        for t in [topic, *self.retry_topics(group, topic)]:
            for qid in self._queue_ids(t, queue_id if t == topic else -1):
                if len(bodies) >= max_nums:
                    break
                offset = self._start_offset(group, t, qid, 0)
                result = self.store.get_message(group, t, qid, offset, max_nums - len(bodies))
                if result is None:
                    continue
                try:
                    if result.status.name == "FOUND":
                        bodies.extend(bytes(b) for b in result.message_buffers)
                    rest += max(0, result.max_offset - result.next_begin_offset)
                finally:
                    result.release()
        if not bodies:
            return response(RC.PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE", {"restNum": str(rest)})
        return response(RC.SUCCESS, None, {"restNum": str(rest)}, b"".join(bodies))

    # ---- NOTIFICATION / POLLING_INFO ---------------------------------------------
    def _has_message(self, group: str, topic: str, queue_id: int, orderly: bool) -> bool:
        now = now_ms()
        for t in [topic, *self.retry_topics(group, topic)]:
            for qid in self._queue_ids(t, queue_id if t == topic else -1):
                if orderly and self.ctx.order.blocked((t, group, qid), now):
                    continue
                if self._start_offset(group, t, qid, 0) < \
                        self.store.get_max_offset_in_queue(t, qid):
                    return True
        return False

    async def notification(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields or {}
        try:
            group, topic = ext_str(ext, "consumerGroup"), ext_str(ext, "topic")
            queue_id = ext_int(ext, "queueId")
            poll_time = ext_int(ext, "pollTime", 0)
        except HeaderError as exc:
            return response(RC.SYSTEM_ERROR, str(exc))
        refused = self._check(channel, group, topic, queue_id)
        if refused is not None:
            return refused
        cfg = self.sgm.find_subscription_group_config(group)
        orderly = ext_bool(ext, "order") or cfg.consumeMessageOrderly
        deadline = time.monotonic() + poll_time / 1000
        while True:
            has = self._has_message(group, topic, queue_id, orderly)
            remaining = deadline - time.monotonic()
            if has or remaining <= 0 or not channel.is_active():
                return response(RC.SUCCESS, None, {"hasMsg": "true" if has else "false",
                                                   "pollingFull": "false"})
            if self.ctx.polling.full():  # 5.3.3 answers success with pollingFull set
                return response(RC.SUCCESS, None, {"hasMsg": "false", "pollingFull": "true"})
            await self.ctx.polling.wait(self.wait_topics(group, topic), remaining)

    def polling_info(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields or {}
        try:
            group, topic = ext_str(ext, "consumerGroup"), ext_str(ext, "topic")
            queue_id = ext_int(ext, "queueId")
        except HeaderError as exc:
            return response(RC.SYSTEM_ERROR, str(exc))
        refused = self._check(channel, group, topic, queue_id)
        if refused is not None:
            return refused
        return response(RC.SUCCESS, None,
                        {"pollingNum": str(self.ctx.polling.polling_num(topic))})


def _pop_queue_now(p: PopMessageProcessor, out: PopResult, group: str, topic: str,
                   read_topic: str, qid: int, nums: int, pop_time: int, invisible: int,
                   revive_qid: int, init_mode: int, orderly: bool, matches: Any,
                   record_filter: Any) -> tuple | None:
    """One queue of a pop read, its checkpoint written and its records added
    to ``out``: None once done (or nothing to do), or, when the checkpoint's
    record must wait for the store (``write_now`` declined), ``(lock key,
    checkpoint, read result, offsets, next offset, records, start offset)``
    with the queue still locked, for ``_pop_queue`` to write the record and
    finish with ``pop_queue_tail``.  The twin of
    ``rmq._fast.pop_queue.pop_queue_now``."""
    ctx = p.ctx
    key = (read_topic, group, qid)
    locks = ctx.locks
    if key in locks:
        return None  # another pop of this group reads this queue right now
    if orderly and ctx.order.blocked(key, pop_time):
        return None
    locks.add(key)
    staged = None
    try:
        offset = p._start_offset(group, read_topic, qid, init_mode)
        result = p.store.get_message(group, read_topic, qid, offset, nums, None, matches)
        if result is None:
            return None
        if record_filter is not None:
            filter_result(result, record_filter)
        found = result.status is FOUND and result.message_count > 0
        offsets = result.message_queue_offsets if found else []
        next_offset = result.next_begin_offset
        out.rest += max(0, result.max_offset - next_offset)
        if read_topic != topic:  # redeliveries are rewritten: copies
            buffers = [bytes(b) for b in result.message_buffers] if found else []
            result.release()
        elif found:
            buffers = result.body_views  # sent as they lie in the commit log
        else:
            buffers = []
            result.release()
        if not offsets:
            # everything filtered out, or the offset corrected (a store newer
            # than the offsets): go on from where the store says
            if next_offset != offset and next_offset >= 0 and (not orderly or not found):
                p.com.commit_offset("pop", group, read_topic, qid,
                                                          next_offset)
            return None
        if orderly:
            counts = ctx.order.on_pop(key, offsets, pop_time, invisible)
            for o in offsets:  # 5.3.3 lists the offsets popped before only
                if counts[o] > 0:
                    append_info(out.order_info, read_topic, order_offset_key(qid, o), counts[o])
            append_info(out.order_info, read_topic, qid, min(counts.values()))
            stored = True
        else:
            ck = PopCheckPoint(read_topic, group, qid, offset, pop_time, invisible,
                               [o - offset for o in offsets], p.bc.brokerName)
            ck.revive_offset = 0
            stored = ctx.revive.write_now(revive_qid, ck)
            if stored is None:
                staged = (key, ck, result, offsets, next_offset, buffers, offset)
                return staged
        pop_queue_tail(p, out, group, topic, read_topic, qid, offset, offsets, next_offset,
                       buffers, result, stored, not orderly, pop_time, invisible, revive_qid)
        return None
    finally:
        if staged is None:
            locks.discard(key)


def _pop_queue_tail(p: PopMessageProcessor, out: PopResult, group: str, topic: str,
                    read_topic: str, qid: int, offset: int, offsets: list[int],
                    next_offset: int, buffers: list, result: Any, stored: bool, commit: bool,
                    pop_time: int, invisible: int, revive_qid: int) -> None:
    """A queue's read handed out once its checkpoint is stored (``stored``;
    else nothing is and the offset stays where it was): the group's offset
    moved (``commit``: not for an orderly pop), the offsets texts, the records.
    The twin of ``rmq._fast.pop_queue.pop_queue_tail``."""
    if not stored:
        if read_topic == topic:
            result.release()
        return  # nothing handed out: the offset stays where it was
    if commit:
        p.com.commit_offset("pop", group, read_topic, qid, next_offset)
    append_info(out.start_info, read_topic, qid, offset)
    append_info(out.msg_info, read_topic, qid, join_ints(offsets))
    if read_topic != topic:  # redeliveries: handle inside, original topic
        buffers = [p._as_original(b, topic, offset, pop_time, invisible, revive_qid, read_topic)
                   for b in buffers]
    out.size += sum(map(len, buffers))
    out.bodies.extend(buffers)
    out.count += len(offsets)
    if result.max_offset > next_offset:  # pops held while this one read can go on
        p.ctx.polling.notify(read_topic)


def _lane_pop(p: PopMessageProcessor, channel: Channel, ext: dict[str, str]) -> Any:
    """A POP_MESSAGE the pop lane serves (``PopLaneSupport.take``): its
    answer or the coroutine that completes with it, as ``pop_answer_now``
    gives them; None (nothing done) for a pop the general path is to serve
    whole -- a refusal, an orderly pop, an SQL92 filter, or one that would
    wait for messages (a pollTime) where none may be found.  The twin of
    ``rmq._fast.pop_queue.lane_pop``, which serves the usual pop in one call
    and hands anything else to this one."""
    req = p.read_pop(channel, ext)
    if type(req) is not PopRequest or req.orderly or req.record_filter is not None \
            or (req.poll_time > 0 and not p.may_find(req)):
        return None
    return p.pop_answer_now(channel, req)


pop_queue_now = _pop_queue_now
pop_queue_tail = _pop_queue_tail
lane_pop = _lane_pop
_c = compiled("pop_queue")
if _c is not None:
    _c.bind(PopCheckPoint, FOUND, filter_result, RETRY_GROUP_TOPIC_PREFIX)
    _c.bind_lane(_lane_pop, PopResult, PopRequest, pop_header, RC.SUCCESS, RC.POLLING_TIMEOUT)
    _c.bind_holders(PopMessageProcessor, PopContext, BrokerConfig, TopicConfig,
                    SubscriptionGroupConfig, GetMessageResult)
    _c.bind_types(DefaultMessageStore, ConsumeQueue, PopPolling, BrokerStats, CQ_STORE_UNIT_SIZE)
    pop_queue_now = _c.pop_queue_now
    pop_queue_tail = _c.pop_queue_tail
    lane_pop = _c.lane_pop
