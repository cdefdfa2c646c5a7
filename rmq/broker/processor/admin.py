"""AdminBrokerProcessor: the broker's default processor (RocketMQ ``AdminBrokerProcessor``).

Serves the administration codes of PROTOCOL.md §3.5 (topics, subscription
groups, broker config, runtime info, offsets, statistics, store
maintenance).  Every other code reaching it is answered
REQUEST_CODE_NOT_SUPPORTED.  Writes of topics and groups are refused on a
slave.  Bodies are fastjson-compatible JSON; maps keyed by MessageQueue use
the compact JSON of the queue as a quoted key (what every 4.9 client reads).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from typing import Any

from rmq.broker.configuration import START_ONLY_KEYS
from rmq.broker.processor.admin_acl import AdminAclSupport
from rmq.broker.processor.admin_consumer import AdminConsumerSupport
from rmq.broker.subscription_group_manager import SubscriptionGroupConfig
from rmq.common import fastjson, topic_attributes
from rmq.common.codes import CURRENT_VERSION, RequestCode, ResponseCode
from rmq.common.java import CURRENT_VERSION_DESC, language_name
from rmq.common.logging import BROKER_LOGGER_NAME
from rmq.common.properties import ConfigError, parse_properties
from rmq.common.protocol.headers_admin import (
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    GetBrokerConfigResponseHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
)
from rmq.common.protocol.headers_broker import (
    GetEarliestMsgStoretimeResponseHeader,
    OffsetResponseHeader,
    QueueOffsetRequestHeader,
    SearchOffsetRequestHeader,
)
from rmq.common.topic_config import TOPIC_FILTER_TYPES, TopicConfig
from rmq.common.topics import is_system_topic, validate_topic
from rmq.remoting import Channel, RemotingCommand
from rmq.remoting.handler_table import HandlerTableProcessor
from rmq.store.multi_dispatch import is_lmq

log = logging.getLogger(BROKER_LOGGER_NAME)

R = RequestCode
SLAVE_REFUSED = ("Can't modify topic or subscription group from slave broker, "
                 "please execute it from master broker.")


def human_readable_bytes(n: int) -> str:
    """``MixAll.humanReadableByteCount(bytes, false)``."""
    if n < 1024:
        return f"{n} B"
    exp = 0
    value = float(n)
    while value >= 1024 and exp < 6:
        value /= 1024
        exp += 1
    return f"{n / 1024 ** exp:.1f} {'KMGTPE'[exp - 1]}iB"


def mq_key(topic: str, broker_name: str, queue_id: int) -> str:
    """A MessageQueue as a map key: its compact JSON (PROTOCOL.md §4.2)."""
    return fastjson.dumps({"brokerName": broker_name, "queueId": queue_id,
                           "topic": topic}).decode()


def _ok(body: bytes | None = None, header: Any = None) -> RemotingCommand:
    return RemotingCommand.create_response(ResponseCode.SUCCESS, None, header, body)


def _error(code: int, remark: str) -> RemotingCommand:
    return RemotingCommand.create_response(code, remark)


class AdminBrokerProcessor(HandlerTableProcessor):
    """Admin requests; built by the controller with itself as the context."""

    def __init__(self, controller) -> None:
        self.c = controller
        self.handlers = {
            R.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            R.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            R.GET_ALL_TOPIC_CONFIG: self.get_all_topic_config,
            R.UPDATE_BROKER_CONFIG: self.update_broker_config,
            R.GET_BROKER_CONFIG: self.get_broker_config,
            R.GET_BROKER_RUNTIME_INFO: self.get_broker_runtime_info,
            R.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset_by_timestamp,
            R.GET_MAX_OFFSET: self.get_max_offset,
            R.GET_MIN_OFFSET: self.get_min_offset,
            R.GET_EARLIEST_MSG_STORETIME: self.get_earliest_msg_storetime,
            R.GET_ALL_CONSUMER_OFFSET: self.get_all_consumer_offset,
            R.GET_ALL_DELAY_OFFSET: self.get_all_delay_offset,
            R.GET_TIMER_CHECK_POINT: self.get_timer_check_point,
            R.GET_TIMER_METRICS: self.get_timer_metrics,
            R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_and_create_subscription_group,
            R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.get_all_subscription_group,
            R.DELETE_SUBSCRIPTIONGROUP: self.delete_subscription_group,
            R.GET_TOPIC_STATS_INFO: self.get_topic_stats_info,
            R.GET_CONSUMER_CONNECTION_LIST: self.get_consumer_connection_list,
            R.GET_PRODUCER_CONNECTION_LIST: self.get_producer_connection_list,
            R.GET_CONSUME_STATS: self.get_consume_stats,
            R.QUERY_TOPIC_CONSUME_BY_WHO: self.query_topic_consume_by_who,
            R.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: self.get_system_topic_list,
            R.CLEAN_EXPIRED_CONSUMEQUEUE: self.clean_expired_consume_queue,
            R.DELETE_EXPIRED_COMMITLOG: self.delete_expired_commit_log,
            R.CLEAN_UNUSED_TOPIC: self.clean_unused_topic,
        }
        self.handlers.update(AdminConsumerSupport(controller, mq_key).handlers())
        self.handlers.update(AdminAclSupport(controller).handlers())

    # ---- topics ---------------------------------------------------------------
    def _refuse_on_slave(self) -> RemotingCommand | None:
        return _error(ResponseCode.SYSTEM_ERROR, SLAVE_REFUSED) if self.c.is_slave() else None

    @staticmethod
    def _check_topic(topic: str) -> RemotingCommand | None:
        reason = validate_topic(topic)
        if reason is not None:
            return _error(ResponseCode.SYSTEM_ERROR, reason)
        if is_system_topic(topic):
            return _error(ResponseCode.SYSTEM_ERROR,
                          f"The topic[{topic}] is conflict with system topic.")
        return None

    @staticmethod
    def _creation_timed(times, values: tuple[str, ...], response: RemotingCommand,
                        start: float) -> RemotingCommand:
        """Record a creation's time (while the metrics exporter keeps them)."""
        if times is not None:
            status = "success" if response.code == ResponseCode.SUCCESS else "failure"
            times.record((status, *values), int((time.perf_counter() - start) * 1000))
        return response

    async def update_and_create_topic(self, channel: Channel, request: RemotingCommand):
        start = time.perf_counter()
        topic = (request.ext_fields or {}).get("topic", "")
        system = ("true" if is_system_topic(topic) else "false",)
        response = _error(ResponseCode.SYSTEM_ERROR, "")  # what a raise is answered with
        try:
            response = await self._update_and_create_topic(channel, request)
        finally:
            self._creation_timed(self.c.topic_create_times, system, response, start)
        return response

    async def _update_and_create_topic(self, channel: Channel, request: RemotingCommand):
        refused = self._refuse_on_slave()
        if refused:
            return refused
        h = request.decode_header(CreateTopicRequestHeader)
        log.info("updateAndCreateTopic called by %s", channel.remote_addr)
        bad = self._check_topic(h.topic)
        if bad:
            return bad
        if h.topicFilterType not in TOPIC_FILTER_TYPES:
            return _error(ResponseCode.SYSTEM_ERROR,
                          f"topicFilterType {h.topicFilterType} is not SINGLE_TAG or MULTI_TAG")
        tc = TopicConfig(h.topic, h.readQueueNums, h.writeQueueNums, h.perm, h.topicFilterType,
                         h.topicSysFlag or 0)
        old = self.c.topic_config_manager.table.get(h.topic)
        try:
            tc.attributes = topic_attributes.alter(
                old is None, old.attributes if old is not None else {},
                topic_attributes.parse(h.attributes))
        except ValueError as exc:
            return _error(ResponseCode.SYSTEM_ERROR, str(exc))
        self.c.topic_config_manager.update_topic_config(tc)
        await self.c.register_increment_broker_data(tc)
        return _ok()

    def delete_topic(self, channel: Channel, request: RemotingCommand):
        refused = self._refuse_on_slave()
        if refused:
            return refused
        h = request.decode_header(DeleteTopicRequestHeader)
        log.info("deleteTopic called by %s", channel.remote_addr)
        bad = self._check_topic(h.topic)
        if bad:
            return bad
        if is_lmq(h.topic):  # an LMQ has no topic config: its consume queue goes
            self.c.message_store.clean_unused_lmq_topic(h.topic)
            return _ok()
        self.c.topic_config_manager.delete_topic_config(h.topic)
        self.c.consumer_offset_manager.clean_offset_by_topic(h.topic)
        self.c.message_store.delete_topics({h.topic})
        self.c.stats.on_topic_deleted(h.topic)
        return _ok()

    def get_all_topic_config(self, channel: Channel, request: RemotingCommand):
        return _ok(self.c.topic_config_manager.encode().encode("utf-8"))

    def get_system_topic_list(self, channel: Channel, request: RemotingCommand):
        topics = sorted(self.c.topic_config_manager.system_topics)
        return _ok(fastjson.dumps({"topicList": topics}))

    # ---- broker config --------------------------------------------------------
    def update_broker_config(self, channel: Channel, request: RemotingCommand):
        log.info("updateBrokerConfig called by %s", channel.remote_addr)
        if not request.body:
            return _ok()
        try:
            props = parse_properties(bytes(request.body).decode("utf-8"))
        except UnicodeDecodeError:
            return _error(ResponseCode.SYSTEM_ERROR, "string2Properties error")
        if set(props) & self.c.broker_config.black_list():
            return _error(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        try:
            invalid = self.c.configuration.update(props)
        except ConfigError as e:
            return _error(ResponseCode.SYSTEM_ERROR, str(e))
        if invalid:
            return _error(ResponseCode.SYSTEM_ERROR,
                          f"string2Properties error: cannot parse {', '.join(invalid)}")
        if "brokerPermission" in props:
            self.c.on_broker_permission_changed()
        if "rmqTestPutDelayMillis" in props:
            self.c.on_put_delay_changed()
        deferred = sorted(set(props) & START_ONLY_KEYS)
        if deferred:
            return RemotingCommand.create_response(
                ResponseCode.SUCCESS, f"saved, applied at the next start: {', '.join(deferred)}")
        return _ok()

    def get_broker_config(self, channel: Channel, request: RemotingCommand):
        conf = self.c.configuration
        header = GetBrokerConfigResponseHeader(version=conf.data_version.encode().decode())
        return _ok(conf.formatted().encode("utf-8"), header)

    def get_broker_runtime_info(self, channel: Channel, request: RemotingCommand):
        return _ok(fastjson.dumps({"table": self.runtime_info()}))

    def runtime_info(self) -> dict[str, str]:
        c, store, stats = self.c, self.c.message_store, self.c.stats
        info: dict[str, Any] = {str(k): v for k, v in store.get_runtime_info().items()}
        q = c.request_queues
        info.update({
            "brokerVersionDesc": CURRENT_VERSION_DESC,
            "brokerVersion": CURRENT_VERSION,
            "msgPutTotalYesterdayMorning": stats.put_yesterday_morning,
            "msgPutTotalTodayMorning": stats.put_today_morning,
            "msgPutTotalTodayNow": stats.put_total,
            "msgGetTotalYesterdayMorning": stats.get_yesterday_morning,
            "msgGetTotalTodayMorning": stats.get_today_morning,
            "msgGetTotalTodayNow": stats.get_total,
            "sendThreadPoolQueueSize": len(q["send"]),
            "sendThreadPoolQueueCapacity": c.broker_config.sendThreadPoolQueueCapacity,
            "pullThreadPoolQueueSize": len(q["pull"]),
            "pullThreadPoolQueueCapacity": c.broker_config.pullThreadPoolQueueCapacity,
            "queryThreadPoolQueueSize": len(q["query"]),
            "queryThreadPoolQueueCapacity": c.broker_config.queryThreadPoolQueueCapacity,
            "EndTransactionQueueSize": len(q["end_transaction"]),
            "EndTransactionThreadPoolQueueCapacity":
                c.broker_config.endTransactionPoolQueueCapacity,
            "dispatchBehindBytes": store.dispatch_behind_bytes(),
            "pageCacheLockTimeMills": max(store.lock_time_mills(), c.put_delay.lock_time_ms()),
            "sendThreadPoolQueueHeadWaitTimeMills": q["send"].head_wait_ms(),
            "pullThreadPoolQueueHeadWaitTimeMills": q["pull"].head_wait_ms(),
            "queryThreadPoolQueueHeadWaitTimeMills": q["query"].head_wait_ms(),
            "earliestMessageTimeStamp": store.get_earliest_message_time_store(),
            "startAcceptSendRequestTimeStamp": c.broker_config.startAcceptSendRequestTimeStamp,
            "commitLogDirCapacity": self._commit_log_capacity(),
            "remainTransientStoreBufferNumbs": store.remain_transient_store_buffer_numbs(),
            "remainHowManyDataToFlush":
                human_readable_bytes(store.remain_how_many_data_to_flush()),
            # rmq only: single sends stored by the send lane (rmqSendLaneEnable)
            "rmqSendLaneServed": c.send_lane_support.served if c.send_lane_support else 0,
            # rmq only: pulls answered by the pull lane (rmqPullLaneEnable)
            "rmqPullLaneServed": c.pull_lane_support.served if c.pull_lane_support else 0,
            # rmq only: pops and acks answered by the pop lane (rmqPopLaneEnable)
            "rmqPopLaneServed": c.pop_lane_support.served if c.pop_lane_support else 0,
            # rmq only: the loop's naps after streaming reads (rmqReadNapMicros)
            "rmqReadNaps": getattr(c.remoting_server.pacer, "naps", 0),
        })
        if c.store_config.transientStorePoolEnable:
            info["remainHowManyDataToCommit"] = human_readable_bytes(
                store.commit_log.mfq.remain_how_many_data_to_commit())
        if not c.is_slave():
            info.update(c.schedule_message_service.running_stats())
        timer = getattr(c, "timer_message_store", None)
        info.update(timer.runtime_info() if timer is not None else {
            "timerReadBehind": "0", "timerOffsetBehind": "0", "timerCongestNum": "0",
            "timerEnqueueTps": "0.0", "timerDequeueTps": "0.0"})
        return {k: (("true" if v else "false") if isinstance(v, bool) else str(v))
                for k, v in info.items()}

    def _commit_log_capacity(self) -> str:
        path = self.c.store_config.storePathCommitLog or os.path.join(
            self.c.store_config.storePathRootDir, "commitlog")
        try:
            usage = shutil.disk_usage(path.split(",")[0])
        except OSError:
            return "Total : 0 B, Free : 0 B."
        return (f"Total : {human_readable_bytes(usage.total)}, "
                f"Free : {human_readable_bytes(usage.free)}.")

    # ---- offsets ----------------------------------------------------------------
    def get_max_offset(self, channel: Channel, request: RemotingCommand):
        h = request.decode_header(QueueOffsetRequestHeader)
        offset = self.c.message_store.get_max_offset_in_queue(h.topic, h.queueId)
        return _ok(header=OffsetResponseHeader(offset=offset))

    def get_min_offset(self, channel: Channel, request: RemotingCommand):
        h = request.decode_header(QueueOffsetRequestHeader)
        offset = self.c.message_store.get_min_offset_in_queue(h.topic, h.queueId)
        return _ok(header=OffsetResponseHeader(offset=offset))

    def search_offset_by_timestamp(self, channel: Channel, request: RemotingCommand):
        h = request.decode_header(SearchOffsetRequestHeader)
        offset = self.c.message_store.get_offset_in_queue_by_time(h.topic, h.queueId,
                                                                  h.timestamp)
        return _ok(header=OffsetResponseHeader(offset=offset))

    def get_earliest_msg_storetime(self, channel: Channel, request: RemotingCommand):
        h = request.decode_header(QueueOffsetRequestHeader)
        ts = self.c.message_store.get_earliest_message_time(h.topic, h.queueId)
        return _ok(header=GetEarliestMsgStoretimeResponseHeader(timestamp=ts))

    def get_all_consumer_offset(self, channel: Channel, request: RemotingCommand):
        return _ok(self.c.consumer_offset_manager.encode().encode("utf-8"))

    def get_all_delay_offset(self, channel: Channel, request: RemotingCommand):
        path = os.path.join(self.c.store_config.storePathRootDir, "config", "delayOffset.json")
        try:
            with open(path, "rb") as f:
                content = f.read()
        except OSError:
            content = b""
        if not content:
            return _error(ResponseCode.SYSTEM_ERROR, "No delay offset in this broker")
        return _ok(content)

    def get_timer_check_point(self, channel: Channel, request: RemotingCommand):
        """The 56 bytes of ``TimerCheckpoint.encode`` (what 5.3.3 slaves sync)."""
        timer = getattr(self.c, "timer_message_store", None)
        if timer is None:
            return _error(ResponseCode.SYSTEM_ERROR, "The checkpoint is null")
        from rmq.store.timer.layout import pack_checkpoint
        return _ok(pack_checkpoint(timer.cp.fields()))

    def get_timer_metrics(self, channel: Channel, request: RemotingCommand):
        """``config/timermetrics`` as JSON text."""
        timer = getattr(self.c, "timer_message_store", None)
        if timer is None:
            return _error(ResponseCode.SYSTEM_ERROR, "The timer message store is null")
        return _ok(timer.metrics.encode().encode("utf-8"))

    # ---- subscription groups ------------------------------------------------------
    def update_and_create_subscription_group(self, channel: Channel, request: RemotingCommand):
        start = time.perf_counter()
        return self._creation_timed(self.c.group_create_times, (),
                                    self._update_and_create_subscription_group(channel, request),
                                    start)

    def _update_and_create_subscription_group(self, channel: Channel, request: RemotingCommand):
        refused = self._refuse_on_slave()
        if refused:
            return refused
        log.info("updateAndCreateSubscriptionGroup called by %s", channel.remote_addr)
        try:
            cfg = SubscriptionGroupConfig.from_json_obj(fastjson.loads(bytes(request.body or b"")))
        except ValueError as exc:
            return _error(ResponseCode.SYSTEM_ERROR, f"bad subscription group config: {exc}")
        self.c.subscription_group_manager.update_subscription_group_config(cfg)
        return _ok()

    def get_all_subscription_group(self, channel: Channel, request: RemotingCommand):
        return _ok(self.c.subscription_group_manager.encode().encode("utf-8"))

    def delete_subscription_group(self, channel: Channel, request: RemotingCommand):
        refused = self._refuse_on_slave()
        if refused:
            return refused
        h = request.decode_header(DeleteSubscriptionGroupRequestHeader)
        log.info("deleteSubscriptionGroup called by %s", channel.remote_addr)
        self.c.subscription_group_manager.delete_subscription_group_config(h.groupName)
        if h.removeOffset:
            self.c.consumer_offset_manager.remove_offset(h.groupName)
        self.c.stats.on_group_deleted(h.groupName)
        return _ok()

    # ---- statistics -------------------------------------------------------------
    def _store_time(self, topic: str, queue_id: int, offset: int) -> int:
        if offset < 0:
            return 0
        return self.c.message_store.get_message_store_timestamp(topic, queue_id, offset)

    def get_topic_stats_info(self, channel: Channel, request: RemotingCommand):
        h = request.decode_header(GetTopicStatsInfoRequestHeader)
        tc = self.c.topic_config_manager.select_topic_config(h.topic)
        if tc is None:
            return _error(ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
        store, name = self.c.message_store, self.c.broker_config.brokerName
        table = {}
        for qid in range(tc.writeQueueNums):
            lo = max(0, store.get_min_offset_in_queue(h.topic, qid))
            hi = max(0, store.get_max_offset_in_queue(h.topic, qid))
            last = self._store_time(h.topic, qid, hi - 1) if hi > 0 else 0
            table[mq_key(h.topic, name, qid)] = {"lastUpdateTimestamp": last, "maxOffset": hi,
                                                 "minOffset": lo}
        return _ok(fastjson.dumps({"offsetTable": table}))

    def get_consume_stats(self, channel: Channel, request: RemotingCommand):
        h = request.decode_header(GetConsumeStatsRequestHeader)
        c = self.c
        group = h.consumerGroup
        listed = [t for t in (h.topicList or "").split(";") if t.strip()]
        topics = set(listed) if listed else {h.topic} if h.topic else \
            c.consumer_offset_manager.which_topic_by_consumer(group)
        # a listed topic is answered whatever the group subscribes, as in 5.3.3
        online = None if listed else c.consumer_manager.get_consumer_group_info(group)
        table: dict[str, Any] = {}
        tps = 0.0
        for topic in sorted(topics):
            tc = c.topic_config_manager.select_topic_config(topic)
            if tc is None:
                log.warning("consumeStats, topic config not exist, %s", topic)
                continue
            if online is not None and online.subscription_table and \
                    topic not in online.subscription_table:
                continue
            tps += c.stats.tps_group_get_nums(group, topic)
            for qid in range(tc.readQueueNums):
                broker_offset = max(0, c.message_store.get_max_offset_in_queue(topic, qid))
                consumer_offset = max(0, c.consumer_offset_manager.query_offset(group, topic, qid))
                pull_offset = c.consumer_offset_manager.query_pull_offset(group, topic, qid)
                last = self._store_time(topic, qid, consumer_offset - 1) if consumer_offset else 0
                table[mq_key(topic, c.broker_config.brokerName, qid)] = {
                    "brokerOffset": broker_offset, "consumerOffset": consumer_offset,
                    "lastTimestamp": last, "pullOffset": max(consumer_offset, pull_offset)}
        return _ok(fastjson.dumps({"consumeTps": tps, "offsetTable": table}))

    @staticmethod
    def _connection(info) -> dict[str, Any]:
        return {"clientAddr": info.channel.remote_addr, "clientId": info.client_id,
                "language": language_name(info.language), "version": info.version}

    def get_consumer_connection_list(self, channel: Channel, request: RemotingCommand):
        h = request.decode_header(GetConsumerConnectionListRequestHeader)
        info = self.c.consumer_manager.get_consumer_group_info(h.consumerGroup)
        if info is None:
            return _error(ResponseCode.CONSUMER_NOT_ONLINE,
                          f"the consumer group[{h.consumerGroup}] not online")
        body = {
            "connectionSet": [self._connection(ci) for ci in info.channel_info_table.values()],
            "consumeFromWhere": info.consume_from_where.name,
            "consumeType": info.consume_type.name,
            "messageModel": info.message_model.name,
            "subscriptionTable": {t: s.to_json_obj() for t, s in info.subscription_table.items()},
        }
        return _ok(fastjson.dumps(body))

    def get_producer_connection_list(self, channel: Channel, request: RemotingCommand):
        h = request.decode_header(GetProducerConnectionListRequestHeader)
        channels = self.c.producer_manager.group_channel_table.get(h.producerGroup)
        if not channels:
            return _error(ResponseCode.SYSTEM_ERROR,
                          f"the producer group[{h.producerGroup}] not exist")
        body = {"connectionSet": [self._connection(ci) for ci in channels.values()]}
        return _ok(fastjson.dumps(body))

    def query_topic_consume_by_who(self, channel: Channel, request: RemotingCommand):
        h = request.decode_header(QueryTopicConsumeByWhoRequestHeader)
        groups = self.c.consumer_manager.query_topic_consume_by_who(h.topic)
        groups |= self.c.consumer_offset_manager.which_group_by_topic(h.topic)
        return _ok(fastjson.dumps({"groupList": sorted(groups)}))

    # ---- store maintenance ------------------------------------------------------------
    def clean_expired_consume_queue(self, channel: Channel, request: RemotingCommand):
        log.warning("invoke cleanExpiredConsumeQueue function from %s", channel.remote_addr)
        self.c.message_store.clean_expired_consumer_queue()
        return _ok()

    def delete_expired_commit_log(self, channel: Channel, request: RemotingCommand):
        log.warning("invoke deleteExpiredCommitLog function from %s", channel.remote_addr)
        self.c.message_store.execute_delete_files_manually()
        return _ok()

    def clean_unused_topic(self, channel: Channel, request: RemotingCommand):
        log.warning("invoke cleanUnusedTopic function from %s", channel.remote_addr)
        self.c.message_store.clean_unused_topic(set(self.c.topic_config_manager.table))
        return _ok()
