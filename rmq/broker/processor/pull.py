"""PullMessageProcessor: PULL_MESSAGE as RocketMQ 4.9.8 answers it
(../shared/spec/PROTOCOL.md 3.3.5).

The body of a SUCCESS is the list of memoryviews the store hands out (the
records as they sit in the mapped commit log, one view per run of adjacent
records); the server writes them with ``writelines`` without copying.  Tag filtering compares consume-queue tag
codes with the hashes of the tags in the subscription *string* (the C++
client's heartbeat codeSet is not usable).  Pulls that find nothing are held
by the PullRequestHoldService (long polling) when the client allows it.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from typing import Any

from rmq.broker.longpolling.pull_request_hold_service import PullRequest, PullRequestHoldService
from rmq.broker.processor.send_support import FAQ_SUFFIX
from rmq.client.heartbeat import (
    EXPRESSION_TAG,
    SUB_ALL,
    MessageModel,
    SubscriptionData,
    build_subscription,
)
from rmq.common import fastjson, java
from rmq.common import message as mc
from rmq.common import topics as T
from rmq.common.codes import ResponseCode
from rmq.filter.message_filter import filter_result
from rmq.remoting import Channel, RemotingCommand
from rmq.remoting.command import RPC_RESPONSE
from rmq.remoting.exceptions import RemotingCommandError
from rmq.store import GetMessageStatus, MessageExtBrokerInner
from rmq.store.message_codec import message_properties_to_string

RC = ResponseCode
G = GetMessageStatus

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4

_REQUIRED_INTS = ("queueId", "queueOffset", "maxMsgNums", "sysFlag", "commitOffset",
                  "suspendTimeoutMillis", "subVersion")

# store status -> response code (OFFSET_MOVED cases that depend on the request
# offset are decided in ``_code``)
_STATUS_CODES = {
    G.FOUND: RC.SUCCESS,
    G.MESSAGE_WAS_REMOVING: RC.PULL_RETRY_IMMEDIATELY,
    G.NO_MATCHED_MESSAGE: RC.PULL_RETRY_IMMEDIATELY,
    G.OFFSET_FOUND_NULL: RC.PULL_NOT_FOUND,
    G.OFFSET_OVERFLOW_BADLY: RC.PULL_OFFSET_MOVED,
    G.OFFSET_OVERFLOW_ONE: RC.PULL_NOT_FOUND,
    G.OFFSET_TOO_SMALL: RC.PULL_OFFSET_MOVED,
}


class PullHeader:
    """``PullMessageRequestHeader``, parsed by hand (one per pull)."""

    __slots__ = ("consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag",
                 "commitOffset", "suspendTimeoutMillis", "subscription", "subVersion",
                 "expressionType")

    @classmethod
    def make(cls, group: str, topic: str, queue_id: int, queue_offset: int, max_nums: int,
             sys_flag: int, commit_offset: int, suspend_ms: int, subscription: str | None,
             sub_version: int, expression_type: str | None) -> PullHeader:
        """A header from values already read (the pull lane reads them in C)."""
        h = cls()
        h.consumerGroup, h.topic, h.queueId, h.queueOffset = group, topic, queue_id, queue_offset
        h.maxMsgNums, h.sysFlag, h.commitOffset = max_nums, sys_flag, commit_offset
        h.suspendTimeoutMillis, h.subscription, h.subVersion = suspend_ms, subscription, sub_version
        h.expressionType = expression_type
        return h

    @classmethod
    def parse(cls, ext: dict[str, str] | None) -> PullHeader:
        h = cls()
        try:  # one pass for a well-formed header; the checked pass names what is wrong
            h.consumerGroup, h.topic = ext["consumerGroup"], ext["topic"]
            h.queueId, h.queueOffset = int(ext["queueId"]), int(ext["queueOffset"])
            h.maxMsgNums, h.sysFlag = int(ext["maxMsgNums"]), int(ext["sysFlag"])
            h.commitOffset = int(ext["commitOffset"])
            h.suspendTimeoutMillis = int(ext["suspendTimeoutMillis"])
            h.subVersion = int(ext["subVersion"])
        except (KeyError, ValueError, TypeError):
            cls._check(h, ext or {})
        h.subscription = ext.get("subscription")
        h.expressionType = ext.get("expressionType")
        return h

    @staticmethod
    def _check(h: PullHeader, ext: dict[str, str]) -> None:
        for name in ("consumerGroup", "topic"):
            value = ext.get(name)
            if value is None:
                raise RemotingCommandError(f"the custom field {name} is null")
            setattr(h, name, value)
        for name in _REQUIRED_INTS:
            try:
                setattr(h, name, int(ext[name]))
            except (KeyError, ValueError):
                raise RemotingCommandError(f"the custom field {name} is null") from None


def tag_filter(sub: SubscriptionData) -> Callable[[int], bool] | None:
    """``ExpressionMessageFilter.isMatchedByConsumeQueue`` for TAG expressions:
    None (everything matches) for ``*``; else membership of the 32-bit tag code
    among the hashes of the subscription's tags."""
    if sub.class_filter_mode or sub.expression_type != EXPRESSION_TAG or \
            sub.sub_string == SUB_ALL:
        return None
    codes = frozenset(java.string_hash(t) for t in sub.tags_set)

    def matches(tags_code: int) -> bool:
        return ((tags_code + 0x80000000) & 0xFFFFFFFF) - 0x80000000 in codes

    return matches


_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")


def last_store_timestamp(result) -> int:
    """STORETIMESTAMP of a found result's last record (-1 when unreadable)."""
    if not result.body_views or not result.sizes:
        return -1
    view = result.body_views[-1]
    start = len(view) - result.sizes[-1]
    if start < 0 or len(view) - start < 80:
        return -1
    (sys_flag,) = _INT.unpack_from(view, start + 36)
    return _LONG.unpack_from(view, start + (68 if sys_flag & mc.BORNHOST_V6_FLAG else 56))[0]


class PullMessageProcessor:
    def __init__(self, controller: Any) -> None:
        self.c = controller
        self.bc = controller.broker_config
        self.store = controller.message_store
        self.hold = PullRequestHoldService(
            self.store, lambda: self.bc.longPollingEnable,
            lambda ch, req: self.process(ch, req, False))
        controller.pull_request_hold_service = self.hold
        controller.services.append(self.hold)
        controller.add_arrival_listener(self.hold.on_message_arriving, self.hold.on_message_runs,
                                        waiting=(self.hold, "table"))
        self._filters: dict[tuple[str, str, int], Callable[[int], bool] | None] = {}
        # subscriptions carried by requests, parsed once per distinct text (a
        # fresh parse per pull also gave every pull a new subVersion, so the
        # filter cache keyed on it never hit)
        self._request_subs: dict[tuple[str, str | None, str | None], SubscriptionData] = {}

    def process_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        return self.process(channel, request, True)

    def _error(self, code: int, remark: str) -> RemotingCommand:
        return RemotingCommand(code, 0, 409, 0, RPC_RESPONSE, remark, None, None, 0)

    def _subscription(self, channel: Channel, h: PullHeader, has_sub: bool, group_cfg
                      ) -> tuple[RemotingCommand | None, SubscriptionData | None]:
        """The subscription to filter with: from the request when it carries one,
        else from the group's heartbeat data (with its version checks)."""
        if has_sub:
            key = (h.topic, h.subscription, h.expressionType)
            sub = self._request_subs.get(key)
            if sub is None:
                try:
                    sub = build_subscription(h.topic, h.subscription,
                                             h.expressionType or EXPRESSION_TAG)
                except Exception:
                    return self._error(RC.SUBSCRIPTION_PARSE_FAILED,
                                       "parse the consumer's subscription failed"), None
                if len(self._request_subs) > 4096:
                    self._request_subs.clear()
                self._request_subs[key] = sub
            return None, sub
        info = self.c.consumer_manager.get_consumer_group_info(h.consumerGroup)
        if info is None:
            return self._error(RC.SUBSCRIPTION_NOT_EXIST,
                               "the consumer's group info not exist" + FAQ_SUFFIX), None
        if not group_cfg.consumeBroadcastEnable and \
                info.message_model is MessageModel.BROADCASTING:
            return self._error(RC.NO_PERMISSION, f"the consumer group[{h.consumerGroup}] can "
                               "not consume by broadcast way"), None
        sub = info.subscription_table.get(h.topic)
        if sub is None:
            return self._error(RC.SUBSCRIPTION_NOT_EXIST,
                               "the consumer's subscription not exist" + FAQ_SUFFIX), None
        if sub.sub_version < h.subVersion:
            return self._error(RC.SUBSCRIPTION_NOT_LATEST,
                               "the consumer's subscription not latest"), None
        return None, sub

    def _filter_for(self, h: PullHeader, sub: SubscriptionData) -> Callable[[int], bool] | None:
        key = (h.consumerGroup, sub.sub_string, sub.sub_version)
        try:
            return self._filters[key]
        except KeyError:
            if len(self._filters) > 4096:
                self._filters.clear()
            f = self._filters[key] = tag_filter(sub)
            return f

    def process(self, channel: Channel, request: RemotingCommand,
                allow_suspend: bool) -> RemotingCommand | None:
        begin_ns = time.monotonic_ns()
        h = PullHeader.parse(request.ext_fields)
        error, group_cfg, record_filter, matches = self.admit(channel, h)
        if error is not None:
            return error
        result = self.store.get_message(h.consumerGroup, h.topic, h.queueId, h.queueOffset,
                                         h.maxMsgNums, None, matches)
        if result is not None:
            self.record_fall_size(h, result)
        if record_filter is not None and result is not None:
            filter_result(result, record_filter)
        response = self._respond(channel, request, h, group_cfg, result, allow_suspend,
                                 bool(h.sysFlag & FLAG_SUSPEND), matches, begin_ns)
        self.commit_offset(channel, h, result.next_begin_offset if result is not None else -1,
                           allow_suspend)
        return response

    def admit(self, channel: Channel, h: PullHeader) -> tuple:
        """The checks of a pull before the store is read, in 4.9.8's order:
        ``(error response or None, group config, record filter, consume-queue
        filter)``; the record filter (SQL92, or retry topics with
        filterSupportRetry) drops records the consume queue cannot judge."""
        bc = self.bc
        if not mc.is_readable(bc.brokerPermission):
            return self._error(RC.NO_PERMISSION,
                               f"the broker[{bc.brokerIP1}] pulling message is forbidden"), \
                None, None, None
        group_cfg = self.c.subscription_group_manager.find_subscription_group_config(
            h.consumerGroup)
        if group_cfg is None:
            return self._error(RC.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group "
                               f"[{h.consumerGroup}] does not exist, {FAQ_SUFFIX}"), \
                None, None, None
        if not group_cfg.consumeEnable:
            return self._error(RC.NO_PERMISSION, "subscription group no permission, "
                               + h.consumerGroup), None, None, None
        flag = h.sysFlag
        tc = self.c.topic_config_manager.select_topic_config(h.topic)
        if tc is None:
            return self._error(RC.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist, apply first "
                               f"please! {FAQ_SUFFIX}"), None, None, None
        if not mc.is_readable(tc.perm):
            return self._error(RC.NO_PERMISSION,
                               f"the topic[{h.topic}] pulling message is forbidden"), \
                None, None, None
        if h.queueId < 0 or h.queueId >= tc.readQueueNums:
            return self._error(RC.SYSTEM_ERROR, f"queueId[{h.queueId}] is illegal, topic:"
                               f"[{h.topic}] topicConfig.readQueueNums:[{tc.readQueueNums}] "
                               f"consumer:[{channel.remote_addr}]"), None, None, None
        error, sub = self._subscription(channel, h, bool(flag & FLAG_SUBSCRIPTION), group_cfg)
        if error is not None:
            return error, None, None, None
        record_filter = None  # SQL92 (and retry with filterSupportRetry): stored properties
        if sub.expression_type != EXPRESSION_TAG or bc.filterSupportRetry:
            refusal, record_filter = self.c.consumer_filter_manager.pull_filter(
                h.topic, h.consumerGroup, sub, bool(flag & FLAG_SUBSCRIPTION), h.subVersion)
            if refusal is not None:
                return self._error(*refusal), None, None, None
        if sub.expression_type != EXPRESSION_TAG and not bc.enablePropertyFilter:
            return self._error(RC.SYSTEM_ERROR, "The broker does not support consumer to "
                               f"filter message by {sub.expression_type}"), None, None, None
        matches = self._filter_for(h, sub)
        if matches is None and self.store.config.enableConsumeQueueExt \
                and sub.expression_type != EXPRESSION_TAG:  # SQL92 bitmaps in the ext units
            matches = self.c.consumer_filter_manager.consume_queue_filter(
                h.topic, h.consumerGroup, sub, bool(flag & FLAG_SUBSCRIPTION))
        return None, group_cfg, record_filter, matches

    def record_fall_size(self, h: PullHeader, result) -> None:
        """GROUP_GET_FALL_SIZE (diskFallRecorded): how far the read lags the
        commit log's end."""
        if result.disk_fall_behind >= 0 and self.c.store_config.diskFallRecorded:
            self.c.stats.record_disk_fall_behind_size(h.consumerGroup, h.topic, h.queueId,
                                                      result.disk_fall_behind)

    def commit_offset(self, channel: Channel, h: PullHeader, next_offset: int,
                      allow_suspend: bool = True) -> None:
        """The pull offset (where the next pull of the group starts, 5.3.3's
        commitPullOffset on every pull) and the consumer offset the pull
        carries (sysFlag COMMIT_OFFSET), on a master: a request the broker runs
        itself (a held pull's re-run) does not commit the latter again."""
        com = self.c.consumer_offset_manager
        if next_offset >= 0:
            com.commit_pull_offset(h.consumerGroup, h.topic, h.queueId, next_offset)
        if allow_suspend and h.sysFlag & FLAG_COMMIT_OFFSET and not self.c.is_slave():
            com.commit_offset(channel.remote_addr, h.consumerGroup, h.topic, h.queueId,
                              h.commitOffset)

    def suggest_broker(self, group_cfg, result) -> int:
        """suggestWhichBrokerId: with slaveReadEnable the slave when the read
        was beyond memory (consuming slowly), else the group's broker; 0 without."""
        if not self.bc.slaveReadEnable:
            return 0
        return (group_cfg.whichBrokerWhenConsumeSlowly if result.suggest_pulling_from_slave
                else group_cfg.brokerId)

    def _respond(self, channel: Channel, request: RemotingCommand, h: PullHeader, group_cfg,
                 result, allow_suspend: bool, has_suspend: bool,
                 matches: Callable[[int], bool] | None, begin_ns: int) -> RemotingCommand | None:
        if result is None:
            return self._error(RC.SYSTEM_ERROR, "store getMessage return null")
        bc = self.bc
        slave = self.c.is_slave()
        status = result.status
        code = _STATUS_CODES.get(status)
        if code is None:  # NO_MATCHED_LOGIC_QUEUE / NO_MESSAGE_IN_QUEUE
            code = RC.PULL_OFFSET_MOVED if h.queueOffset != 0 else RC.PULL_NOT_FOUND
        # 4.9.8 sets PULL_RETRY_IMMEDIATELY on a slave without slaveReadEnable, but the
        # switch on the store status that follows always overrides it: a slave serves
        # every pull, and slaveReadEnable only decides which broker the client is told
        # to pull from next (the master unless it is on).
        suggest = self.suggest_broker(group_cfg, result)
        if code == RC.SUCCESS:
            body = result.body_views  # one view per run of adjacent records
            self.count_found(h, result, begin_ns)
        else:
            body = None
            result.release()
            if code == RC.PULL_NOT_FOUND and allow_suspend and has_suspend:
                timeout = h.suspendTimeoutMillis if bc.longPollingEnable \
                    else bc.shortPollingTimeMills
                self.hold.suspend(h.topic, h.queueId, PullRequest(
                    request, channel, timeout, time.time_ns() // 1_000_000, h.queueOffset,
                    matches))
                return None
            if code == RC.PULL_OFFSET_MOVED:
                if not slave or self.c.store_config.offsetCheckInSlave:
                    self._offset_moved_event(h, result.next_begin_offset)
                else:
                    suggest = group_cfg.brokerId
                    code = RC.PULL_RETRY_IMMEDIATELY
        ext = {"suggestWhichBrokerId": str(suggest),
               "nextBeginOffset": str(result.next_begin_offset),
               "minOffset": str(result.min_offset), "maxOffset": str(result.max_offset)}
        return RemotingCommand(code, 0, 409, 0, RPC_RESPONSE, status.name, ext, body, 0)

    def count_found(self, h: PullHeader, result, begin_ns: int) -> None:
        """The statistics of a pull that found messages: GROUP_GET_* with the
        time spent (GROUP_GET_LATENCY), from disk or not, and how far behind
        the newest message the last one sent is (GROUP_GET_FALL_TIME)."""
        stats = self.c.stats
        stats.inc_get(h.consumerGroup, h.topic, h.queueId, result.message_count,
                      result.buffer_total_size, (time.monotonic_ns() - begin_ns) // 1_000_000,
                      result.suggest_pulling_from_slave)
        store_ts = last_store_timestamp(result)
        if store_ts >= 0:
            stats.record_disk_fall_behind_time(h.consumerGroup, h.topic, h.queueId,
                                               time.time_ns() // 1_000_000 - store_ts)

    def _offset_moved_event(self, h: PullHeader, new_offset: int) -> None:
        """``generateOffsetMovedEvent``: a record in OFFSET_MOVED_EVENT, tagged
        with the group, telling operators which consumer jumped where."""
        self.c.log.warning("PULL_OFFSET_MOVED:correction offset. topic=%s, groupId=%s, "
                           "requestOffset=%d, newOffset=%d", h.topic, h.consumerGroup,
                           h.queueOffset, new_offset)
        body = fastjson.dumps({
            "consumerGroup": h.consumerGroup,
            "messageQueue": {"brokerName": self.bc.brokerName, "queueId": h.queueId,
                             "topic": h.topic},
            "offsetNew": new_offset, "offsetRequest": h.queueOffset})
        props = {mc.PROPERTY_TAGS: h.consumerGroup, mc.PROPERTY_DELAY_TIME_LEVEL: "0",
                 mc.PROPERTY_KEYS: h.consumerGroup}
        text = message_properties_to_string(props)
        props[mc.PROPERTY_WAIT_STORE_MSG_OK] = "false"  # never block the loop on a flush
        host = self.store.store_host
        msg = MessageExtBrokerInner(
            T.OFFSET_MOVED_EVENT, 0, 0, body, props, text,
            mc.tags_string_to_code(h.consumerGroup), 0, time.time_ns() // 1_000_000, host, host)
        try:
            self.store.put_message(msg)
        except Exception:
            self.c.log.exception("generateOffsetMovedEvent failed")

