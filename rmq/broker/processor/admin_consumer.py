"""The consumer-facing admin codes of RocketMQ 4.9.8's ``AdminBrokerProcessor`` and
``Broker2Client`` (../shared/spec/PROTOCOL.md 3.5 and 3.6).

* Calls into clients: INVOKE_BROKER_TO_RESET_OFFSET (pushes
  RESET_CONSUMER_CLIENT_OFFSET), INVOKE_BROKER_TO_GET_CONSUMER_STATUS
  (GET_CONSUMER_STATUS_FROM_CLIENT to each consumer), GET_CONSUMER_RUNNING_INFO
  and CONSUME_MESSAGE_DIRECTLY (forwarded to one consumer as a new request with
  the admin's extFields).  Requests go through the server that accepted the
  consumer's connection (main or fast port).
* Offsets and statistics: QUERY_CONSUME_TIME_SPAN, QUERY_CORRECTION_OFFSET,
  CLONE_GROUP_OFFSET, GET_BROKER_CONSUME_STATS, VIEW_BROKER_STATS_DATA,
  QUERY_CONSUME_QUEUE, GET_ALL_PRODUCER_INFO, RESUME_CHECK_HALF_MESSAGE.

One deliberate addition to 4.9.8: INVOKE_BROKER_TO_RESET_OFFSET also commits
the new offsets in the broker's offset table, so the reset holds even when a
consumer restarts before it persisted the pushed offsets.
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
import time
from collections.abc import Callable
from typing import Any

from rmq.broker.processor.pull import tag_filter
from rmq.common import fastjson
from rmq.common import message as mc
from rmq.common import topics as T
from rmq.common.codes import LanguageCode, RequestCode, ResponseCode
from rmq.common.java import language_name, version_desc
from rmq.common.logging import BROKER_LOGGER_NAME
from rmq.common.message_id import decode_message_id
from rmq.common.protocol.headers_admin import (
    CloneGroupOffsetRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    GetConsumeStatsInBrokerHeader,
    QueryConsumeQueueRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    QueryCorrectionOffsetHeader,
    ResetOffsetRequestHeader,
    ResumeCheckHalfMessageRequestHeader,
    ViewBrokerStatsDataRequestHeader,
)
from rmq.filter.message_filter import BitmapFilter
from rmq.remoting import Channel, RemotingCommand
from rmq.remoting.exceptions import RemotingTimeoutError
from rmq.store import MessageExtBrokerInner
from rmq.store.consume_queue_ext import CqExtUnit, is_ext_addr
from rmq.store.message_codec import message_properties_to_string

log = logging.getLogger(BROKER_LOGGER_NAME)

R = RequestCode
RC = ResponseCode
V3_0_7_SNAPSHOT = 28
V3_1_8_SNAPSHOT = 62
CALL_CLIENT_TIMEOUT_MS = 10_000
CONSUMER_STATUS_TIMEOUT_MS = 5_000
LONG_MAX = (1 << 63) - 1
CQ_UNIT = 20


def _unit_matcher(sub, bitmap: BitmapFilter | None) -> Callable[[int, CqExtUnit], bool]:
    """``ExpressionMessageFilter.isMatchedByConsumeQueue`` over an ext unit, for
    queryCq's ``eval``: tags for TAG subscriptions, the bloom bits for SQL92."""
    tags = tag_filter(sub)
    if tags is not None:
        return lambda code, _unit: tags(code)
    if bitmap is not None:
        return bitmap.matches_unit
    return lambda _code, _unit: True


def _describe_ext_unit(one: dict[str, Any], unit: CqExtUnit | None,
                       matcher: Callable[[int, CqExtUnit], bool] | None) -> None:
    """The ext unit fields of a QUERY_CONSUME_QUEUE entry (``ConsumeQueueData``):
    the unit as JSON, its bitmap as BitsArray prints it (highest bit first), and
    whether the group's filter lets it through."""
    if unit is None:
        one["msg"] = f"Cq extend not exist!addr: {one['tagsCode']}"
        return
    ext: dict[str, Any] = {"msgStoreTime": unit.store_timestamp, "size": unit.size,
                           "tagsCode": unit.tags_code}
    if unit.bitmap:
        ext["filterBitMap"] = base64.b64encode(unit.bitmap).decode()
        one["bitMap"] = "".join(format(b, "08b") for b in reversed(unit.bitmap))
    one["extendDataJson"] = fastjson.dumps(ext).decode()
    if matcher is not None:
        one["eval"] = bool(matcher(unit.tags_code, unit))


def _ok(body: bytes | None = None) -> RemotingCommand:
    return RemotingCommand.create_response(RC.SUCCESS, None, None, body)


def _error(code: int, remark: str) -> RemotingCommand:
    return RemotingCommand.create_response(code, remark)


def time_text(ms: int) -> str:
    """``UtilAll.timeMillisToHumanString2``: local ``yyyy-MM-dd#HH:mm:ss:SSS``."""
    t = dt.datetime.fromtimestamp(ms / 1000)
    return t.strftime("%Y-%m-%d#%H:%M:%S:") + f"{ms % 1000:03d}"


class AdminConsumerSupport:
    """Handlers for the codes above; ``handlers()`` maps each code to one."""

    def __init__(self, controller, mq_key) -> None:
        self.c = controller
        self.mq_key = mq_key

    def handlers(self) -> dict[int, Any]:
        return {
            R.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            R.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: self.get_consumer_status,
            R.GET_CONSUMER_RUNNING_INFO: self.get_consumer_running_info,
            R.CONSUME_MESSAGE_DIRECTLY: self.consume_message_directly,
            R.QUERY_CONSUME_TIME_SPAN: self.query_consume_time_span,
            R.QUERY_CORRECTION_OFFSET: self.query_correction_offset,
            R.CLONE_GROUP_OFFSET: self.clone_group_offset,
            R.VIEW_BROKER_STATS_DATA: self.view_broker_stats_data,
            R.GET_BROKER_CONSUME_STATS: self.get_broker_consume_stats,
            R.QUERY_CONSUME_QUEUE: self.query_consume_queue,
            R.GET_ALL_PRODUCER_INFO: self.get_all_producer_info,
            R.RESUME_CHECK_HALF_MESSAGE: self.resume_check_half_message,
        }

    @property
    def broker_name(self) -> str:
        return self.c.broker_config.brokerName

    # ---- calls into clients ---------------------------------------------------------
    def _reset_table(self, topic: str, group: str, timestamp: int, force: bool
                     ) -> dict[int, int] | RemotingCommand:
        tc = self.c.topic_config_manager.select_topic_config(topic)
        if tc is None:
            return _error(RC.SYSTEM_ERROR, "[reset-offset] reset offset failed, no topic in "
                          f"this broker. topic={topic}")
        store, offsets = self.c.message_store, self.c.consumer_offset_manager
        table: dict[int, int] = {}
        for qid in range(tc.writeQueueNums):
            current = offsets.query_offset(group, topic, qid)
            if current == -1:
                return _error(RC.SYSTEM_ERROR, f"THe consumer group <{group}> not exist")
            if timestamp == -1:
                target = store.get_max_offset_in_queue(topic, qid)
            else:
                target = store.get_offset_in_queue_by_time(topic, qid, timestamp)
            target = max(target, 0)
            table[qid] = target if force or target < current else current
        return table

    def reset_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(ResetOffsetRequestHeader)
        log.info("[reset-offset] reset offset started by %s. topic=%s, group=%s, timestamp=%s, "
                 "isForce=%s", channel.remote_addr, h.topic, h.group, h.timestamp, h.isForce)
        table = self._reset_table(h.topic, h.group, h.timestamp, h.isForce)
        if isinstance(table, RemotingCommand):
            return table
        info = self.c.consumer_manager.get_consumer_group_info(h.group)
        if info is None or not info.channel_info_table:
            return _error(RC.CONSUMER_NOT_ONLINE, "Consumer not online, so can not reset offset, "
                          f"Group: {h.group} Topic: {h.topic} Timestamp: {h.timestamp}")
        for ci in info.channel_info_table.values():
            if ci.version < V3_0_7_SNAPSHOT:
                return _error(RC.SYSTEM_ERROR, "the client does not support this feature. "
                              f"version={version_desc(ci.version)}")
        if request.language == LanguageCode.CPP:
            pushed = {"offsetTable": [
                {"brokerName": self.broker_name, "offset": off, "queueId": qid, "topic": h.topic}
                for qid, off in table.items()]}
        else:
            pushed = {"offsetTable": {self.mq_key(h.topic, self.broker_name, qid): off
                                      for qid, off in table.items()}}
        push = RemotingCommand.create_request(
            R.RESET_CONSUMER_CLIENT_OFFSET,
            ResetOffsetRequestHeader(topic=h.topic, group=h.group, timestamp=h.timestamp,
                                     isForce=False),
            fastjson.dumps(pushed))
        push.mark_oneway()
        for ch, ci in list(info.channel_info_table.items()):
            try:
                ch.write(push)
                log.info("[reset-offset] reset offset success. topic=%s, group=%s, clientId=%s",
                         h.topic, h.group, ci.client_id)
            except Exception as exc:
                log.error("[reset-offset] reset offset exception. topic=%s, group=%s, error=%s",
                          h.topic, h.group, exc)
        for qid, off in table.items():
            self.c.consumer_offset_manager.commit_offset(channel.remote_addr, h.group, h.topic,
                                                         qid, off)
        body = {"offsetTable": {self.mq_key(h.topic, self.broker_name, qid): off
                                for qid, off in table.items()}}
        return _ok(fastjson.dumps(body))

    async def get_consumer_status(self, channel: Channel, request: RemotingCommand
                                  ) -> RemotingCommand:
        h = request.decode_header(GetConsumerStatusRequestHeader)
        log.info("[get-consumer-status] get consumer status by %s. topic=%s, group=%s",
                 channel.remote_addr, h.topic, h.group)
        info = self.c.consumer_manager.get_consumer_group_info(h.group)
        if info is None or not info.channel_info_table:
            return _error(RC.SYSTEM_ERROR,
                          f"No Any Consumer online in the consumer group: [{h.group}]")
        table: dict[str, Any] = {}
        for ch, ci in list(info.channel_info_table.items()):
            if ci.version < V3_0_7_SNAPSHOT:
                return _error(RC.SYSTEM_ERROR, "the client does not support this feature. "
                              f"version={version_desc(ci.version)}")
            if h.clientAddr and h.clientAddr != ci.client_id:
                continue
            ask = RemotingCommand.create_request(
                R.GET_CONSUMER_STATUS_FROM_CLIENT,
                GetConsumerStatusRequestHeader(topic=h.topic, group=h.group))
            try:
                answer = await self.c.server_for(ch).invoke(ch, ask, CONSUMER_STATUS_TIMEOUT_MS)
            except Exception as exc:
                log.error("[get-consumer-status] get consumer status exception. topic=%s, "
                          "group=%s, error=%s", h.topic, h.group, exc)
                continue
            if answer.code == RC.SUCCESS and answer.body:
                try:
                    status = fastjson.loads(bytes(answer.body))
                except ValueError as exc:
                    log.error("[get-consumer-status] bad body from %s: %s", ci.client_id, exc)
                    continue
                table[ci.client_id] = status.get("messageQueueTable") or {}
            if h.clientAddr:
                break
        return _ok(fastjson.dumps({"consumerTable": table, "messageQueueTable": {}}))

    async def _call_consumer(self, code: int, request: RemotingCommand, group: str,
                             client_id: str | None) -> RemotingCommand:
        """``callConsumer``: a new request with the admin's extFields and body, the
        client's answer returned as it is."""
        ci = self.c.consumer_manager.find_channel(group, client_id or "")
        if ci is None:
            return _error(RC.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        if ci.version < V3_1_8_SNAPSHOT:
            return _error(RC.SYSTEM_ERROR,
                          f"The Consumer <{client_id}> Version <{version_desc(ci.version)}> too "
                          "low to finish, please upgrade it to V3_1_8_SNAPSHOT")
        forward = RemotingCommand.create_request(code, dict(request.ext_fields or {}),
                                                 request.body)
        try:
            return await self.c.server_for(ci.channel).invoke(ci.channel, forward,
                                                              CALL_CLIENT_TIMEOUT_MS)
        except RemotingTimeoutError as exc:
            return _error(RC.CONSUME_MSG_TIMEOUT,
                          f"consumer <{group}> <{client_id}> Timeout: {exc}")
        except Exception as exc:
            return _error(RC.SYSTEM_ERROR,
                          f"invoke consumer <{group}> <{client_id}> Exception: {exc}")

    async def get_consumer_running_info(self, channel: Channel, request: RemotingCommand
                                        ) -> RemotingCommand:
        h = request.decode_header(GetConsumerRunningInfoRequestHeader)
        return await self._call_consumer(R.GET_CONSUMER_RUNNING_INFO, request, h.consumerGroup,
                                         h.clientId)

    async def consume_message_directly(self, channel: Channel, request: RemotingCommand
                                       ) -> RemotingCommand:
        h = request.decode_header(ConsumeMessageDirectlyResultRequestHeader)
        ext = request.ext_fields if request.ext_fields is not None else {}
        ext["brokerName"] = self.broker_name
        request.ext_fields = ext
        try:
            _, offset = decode_message_id(h.msgId or "")
        except ValueError:
            offset = None
        if offset is not None:
            mv = self.c.message_store.select_one_message_by_offset(offset)
            if mv is not None:
                request.body = bytes(mv)
                mv.release()
        return await self._call_consumer(R.CONSUME_MESSAGE_DIRECTLY, request, h.consumerGroup,
                                         h.clientId)

    # ---- offsets and statistics ----------------------------------------------------------
    def query_consume_time_span(self, channel: Channel, request: RemotingCommand
                                ) -> RemotingCommand:
        h = request.decode_header(QueryConsumeTimeSpanRequestHeader)
        tc = self.c.topic_config_manager.select_topic_config(h.topic)
        if tc is None:
            return _error(RC.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
        store = self.c.message_store
        spans = []
        now = time.time_ns() // 1_000_000
        for qid in range(tc.writeQueueNums):
            min_time = store.get_earliest_message_time(h.topic, qid)
            max_offset = store.get_max_offset_in_queue(h.topic, qid)
            max_time = store.get_message_store_timestamp(h.topic, qid, max_offset - 1)
            consumer_offset = self.c.consumer_offset_manager.query_offset(h.group, h.topic, qid)
            if consumer_offset > 0:
                consume_time = store.get_message_store_timestamp(h.topic, qid,
                                                                 consumer_offset - 1)
            else:
                consume_time = min_time
            delay = 0
            if consumer_offset < max_offset:
                delay = now - store.get_message_store_timestamp(h.topic, qid, consumer_offset)
            spans.append({
                "consumeTimeStamp": consume_time, "consumeTimeStampStr": time_text(consume_time),
                "delayTime": delay, "maxTimeStamp": max_time, "maxTimeStampStr": time_text(max_time),
                "messageQueue": {"brokerName": self.broker_name, "queueId": qid,
                                 "topic": h.topic},
                "minTimeStamp": min_time, "minTimeStampStr": time_text(min_time),
            })
        return _ok(fastjson.dumps({"consumeTimeSpanSet": spans}))

    def query_correction_offset(self, channel: Channel, request: RemotingCommand
                                ) -> RemotingCommand:
        h = request.decode_header(QueryCorrectionOffsetHeader)
        offsets = self.c.consumer_offset_manager
        filters = {g for g in (h.filterGroups or "").split(",") if g}
        correction: dict[int, int] = {}
        for group in offsets.which_group_by_topic(h.topic) - filters:
            for qid, off in offsets.query_offset_all(group, h.topic).items():
                correction[qid] = min(off, correction.get(qid, off))
        for qid, off in offsets.query_offset_all(h.compareGroup, h.topic).items():
            current = correction.get(qid)
            if current is not None:
                correction[qid] = LONG_MAX if current > off else current
        return _ok(fastjson.dumps({"correctionOffsets": correction}))

    def clone_group_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(CloneGroupOffsetRequestHeader)
        c = self.c
        topics = ({h.topic} if h.topic and h.topic.strip()
                  else c.consumer_offset_manager.which_topic_by_consumer(h.srcGroup))
        for topic in sorted(topics):
            if c.topic_config_manager.select_topic_config(topic) is None:
                log.warning("[cloneGroupOffset], topic config not exist, %s", topic)
                continue
            if not h.offline and self._group_skips_topic(h.srcGroup, topic):
                log.warning("[cloneGroupOffset], the consumer group[%s], topic[%s] not exist",
                            h.srcGroup, topic)
                continue
            c.consumer_offset_manager.clone_offset(h.srcGroup, h.destGroup, topic)
        return _ok()

    def _group_skips_topic(self, group: str, topic: str) -> bool:
        """An online group that subscribes to something, but not to ``topic``."""
        info = self.c.consumer_manager.get_consumer_group_info(group)
        return bool(info and info.subscription_table) and topic not in info.subscription_table

    def view_broker_stats_data(self, channel: Channel, request: RemotingCommand
                               ) -> RemotingCommand:
        h = request.decode_header(ViewBrokerStatsDataRequestHeader)
        item = self.c.stats.get_stats_item(h.statsName, h.statsKey)
        if item is None:
            return _error(RC.SYSTEM_ERROR,
                          f"The stats <{h.statsName}> <{h.statsKey}> not exist")
        return _ok(fastjson.dumps(item.broker_stats_data()))

    def get_broker_consume_stats(self, channel: Channel, request: RemotingCommand
                                 ) -> RemotingCommand:
        h = request.decode_header(GetConsumeStatsInBrokerHeader)
        c = self.c
        stats_list = []
        total_diff = 0
        for group in sorted(c.subscription_group_manager.table):
            per_topic = []
            for topic in sorted(c.consumer_offset_manager.which_topic_by_consumer(group)):
                tc = c.topic_config_manager.select_topic_config(topic)
                if tc is None or (h.isOrder and not tc.order):
                    continue
                if self._group_skips_topic(group, topic):
                    continue
                table, diff = self._offset_table(group, topic, tc.writeQueueNums)
                total_diff += diff
                per_topic.append({"consumeTps": c.stats.tps_group_get_nums(group, topic),
                                  "offsetTable": table})
            stats_list.append({group: per_topic})
        body = {"brokerAddr": c.broker_addr(), "consumeStatsList": stats_list,
                "totalDiff": total_diff}
        return _ok(fastjson.dumps(body))

    def _offset_table(self, group: str, topic: str, queues: int) -> tuple[dict, int]:
        store, offsets = self.c.message_store, self.c.consumer_offset_manager
        table, diff = {}, 0
        for qid in range(queues):
            broker_offset = max(0, store.get_max_offset_in_queue(topic, qid))
            consumer_offset = max(0, offsets.query_offset(group, topic, qid))
            last = 0
            if consumer_offset > 0:
                last = max(0, store.get_message_store_timestamp(topic, qid, consumer_offset - 1))
            table[self.mq_key(topic, self.broker_name, qid)] = {
                "brokerOffset": broker_offset, "consumerOffset": consumer_offset,
                "lastTimestamp": last}
            diff += broker_offset - consumer_offset
        return table, diff

    def query_consume_queue(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        h = request.decode_header(QueryConsumeQueueRequestHeader)
        store = self.c.message_store
        cq = store.consume_queue_table.get(h.topic or "", {}).get(h.queueId)
        if cq is None:
            return _error(RC.SYSTEM_ERROR, f"{h.queueId}@{h.topic} is not exist!")
        body: dict[str, Any] = {"maxQueueIndex": cq.get_max_offset_in_queue(),
                                "minQueueIndex": cq.get_min_offset_in_queue()}
        unit_filter = None
        if h.consumerGroup is not None:
            sub = self.c.consumer_manager.find_subscription_data(h.consumerGroup, h.topic)
            if sub is None:
                body["filterData"] = f"{h.consumerGroup}@{h.topic} is not online!"
            else:
                body["subscriptionData"] = sub.to_json_obj()
                cfm = self.c.consumer_filter_manager
                data = cfm.get(h.topic, h.consumerGroup)
                body["filterData"] = fastjson.dumps(
                    data.to_json_obj() if data is not None else None).decode()
                unit_filter = _unit_matcher(sub, cfm.consume_queue_filter(
                    h.topic, h.consumerGroup, sub, False))
        response = _ok()
        if cq.read_entry(h.index) is None:
            response.remark = f"Index {h.index} of {h.queueId}@{h.topic} is not exist!"
            return response
        entries = []
        for index in range(h.index, h.index + max(0, h.count)):
            entry = cq.read_entry(index)
            if entry is None:
                break
            phy, size, tags = entry
            one: dict[str, Any] = {"eval": False, "physicOffset": phy, "physicSize": size,
                                   "tagsCode": tags}
            if is_ext_addr(tags):
                _describe_ext_unit(one, cq.ext.get(tags) if cq.ext is not None else None,
                                   unit_filter)
            entries.append(one)
        body["queueData"] = entries
        response.body = fastjson.dumps(body)
        return response

    def get_all_producer_info(self, channel: Channel, request: RemotingCommand
                              ) -> RemotingCommand:
        data = {}
        for group, channels in self.c.producer_manager.group_channel_table.items():
            data[group] = [{"clientId": ci.client_id, "language": language_name(ci.language),
                            "lastUpdateTimestamp": ci.last_update_timestamp,
                            "remoteIP": ch.remote_addr, "version": ci.version}
                           for ch, ci in channels.items()]
        return _ok(fastjson.dumps({"data": data}))

    async def resume_check_half_message(self, channel: Channel, request: RemotingCommand
                                        ) -> RemotingCommand:
        """Put the half message at ``msgId`` back into the half topic with its check
        count reset, so the transaction check (when one runs) looks at it again."""
        h = request.decode_header(ResumeCheckHalfMessageRequestHeader)
        failed = "Exception was thrown when putting message back to RMQ_SYS_TRANS_HALF_TOPIC."
        try:
            _, offset = decode_message_id(h.msgId or "")
        except ValueError:
            return _error(RC.SYSTEM_ERROR, failed)
        store = self.c.message_store
        msg = store.look_message_by_offset(offset)
        if msg is None:
            return _error(RC.SYSTEM_ERROR, failed)
        props = dict(msg.properties)
        props[mc.PROPERTY_TRANSACTION_CHECK_TIMES] = "0"
        tags = props.get(mc.PROPERTY_TAGS)
        inner = MessageExtBrokerInner(
            T.TRANS_HALF_TOPIC, 0, msg.flag, msg.body, props,
            message_properties_to_string(props), mc.tags_string_to_code(tags) if tags else 0,
            msg.sys_flag, msg.born_timestamp, msg.born_host, msg.store_host, 0,
            msg.reconsume_times)
        result = await store.async_put_message(inner)
        if result.is_ok():
            log.info("Put message back to RMQ_SYS_TRANS_HALF_TOPIC. real topic=%s",
                     props.get(mc.PROPERTY_REAL_TOPIC))
            return _ok()
        log.error("Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed.")
        return _error(RC.SYSTEM_ERROR, "Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed.")
