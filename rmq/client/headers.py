"""Request and response custom headers the client sends and reads, with the
exact Java field names of RocketMQ 4.9.8 (../shared/spec/PROTOCOL.md section 3).

The two hot requests (SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE and PULL_MESSAGE)
are built as plain dicts by ``send_header_v2`` and ``pull_header``: they are
sent hundreds of thousands of times per second and a dataclass round trip per
message is measurable.  Their field names are checked against these classes
in the unit tests.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmq.remoting.header import CommandHeader, field_required


@dataclass(slots=True)
class SendMessageRequestHeaderV2(CommandHeader):
    a: str = field_required()  # producerGroup
    b: str = field_required()  # topic
    c: str = field_required()  # defaultTopic
    d: int = field_required()  # defaultTopicQueueNums
    e: int = field_required()  # queueId
    f: int = field_required()  # sysFlag
    g: int = field_required()  # bornTimestamp
    h: int = field_required()  # flag
    i: str | None = None  # properties
    j: int | None = None  # reconsumeTimes
    k: bool = False  # unitMode
    l: int | None = None  # maxReconsumeTimes  # noqa: E741
    m: bool = False  # batch
    n: str | None = None  # brokerName


def send_header_v2(group: str, topic: str, default_topic: str, default_queue_nums: int,
                   queue_id: int, sys_flag: int, born_ts: int, flag: int, properties: str,
                   batch: bool, broker_name: str) -> dict[str, str]:
    """The extFields of a SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE request."""
    return {
        "a": group, "b": topic, "c": default_topic, "d": str(default_queue_nums),
        "e": str(queue_id), "f": str(sys_flag), "g": str(born_ts), "h": str(flag),
        "i": properties, "j": "0", "k": "false", "m": "true" if batch else "false",
        "n": broker_name,
    }


@dataclass(slots=True)
class SendMessageResponseHeader(CommandHeader):
    msgId: str = field_required()
    queueId: int = field_required()
    queueOffset: int = field_required()
    transactionId: str | None = None


@dataclass(slots=True)
class PullMessageRequestHeader(CommandHeader):
    consumerGroup: str = field_required()
    topic: str = field_required()
    queueId: int = field_required()
    queueOffset: int = field_required()
    maxMsgNums: int = field_required()
    sysFlag: int = field_required()
    commitOffset: int = field_required()
    suspendTimeoutMillis: int = field_required()
    subscription: str | None = None
    subVersion: int = field_required()
    expressionType: str | None = None
    bname: str | None = None


# PullSysFlag bits
PULL_FLAG_COMMIT_OFFSET = 0x1
PULL_FLAG_SUSPEND = 0x2
PULL_FLAG_SUBSCRIPTION = 0x4
PULL_FLAG_CLASS_FILTER = 0x8
PULL_FLAG_LITE_PULL = 0x10


def pull_header(group: str, topic: str, queue_id: int, offset: int, max_nums: int,
                sys_flag: int, commit_offset: int, suspend_ms: int, subscription: str | None,
                sub_version: int, expression_type: str, broker_name: str) -> dict[str, str]:
    """The extFields of a PULL_MESSAGE request."""
    ext = {
        "consumerGroup": group, "topic": topic, "queueId": str(queue_id),
        "queueOffset": str(offset), "maxMsgNums": str(max_nums), "sysFlag": str(sys_flag),
        "commitOffset": str(commit_offset), "suspendTimeoutMillis": str(suspend_ms),
        "subVersion": str(sub_version), "expressionType": expression_type, "bname": broker_name,
    }
    if subscription is not None:
        ext["subscription"] = subscription
    return ext


@dataclass(slots=True)
class PullMessageResponseHeader(CommandHeader):
    suggestWhichBrokerId: int = field_required()
    nextBeginOffset: int = field_required()
    minOffset: int = field_required()
    maxOffset: int = field_required()


@dataclass(slots=True)
class GetRouteInfoRequestHeader(CommandHeader):
    topic: str = field_required()
    acceptStandardJsonOnly: bool | None = None


@dataclass(slots=True)
class UnregisterClientRequestHeader(CommandHeader):
    clientID: str = field_required()
    producerGroup: str | None = None
    consumerGroup: str | None = None


@dataclass(slots=True)
class GetConsumerListByGroupRequestHeader(CommandHeader):
    consumerGroup: str = field_required()


@dataclass(slots=True)
class QueryConsumerOffsetRequestHeader(CommandHeader):
    consumerGroup: str = field_required()
    topic: str = field_required()
    queueId: int = field_required()
    bname: str | None = None


@dataclass(slots=True)
class UpdateConsumerOffsetRequestHeader(CommandHeader):
    consumerGroup: str = field_required()
    topic: str = field_required()
    queueId: int = field_required()
    commitOffset: int = field_required()
    bname: str | None = None


@dataclass(slots=True)
class OffsetResponseHeader(CommandHeader):
    """QueryConsumerOffset / GetMaxOffset / GetMinOffset / SearchOffset responses."""

    offset: int = field_required()


@dataclass(slots=True)
class QueueOffsetRequestHeader(CommandHeader):
    """GET_MAX_OFFSET / GET_MIN_OFFSET / GET_EARLIEST_MSG_STORETIME requests."""

    topic: str = field_required()
    queueId: int = field_required()
    bname: str | None = None


@dataclass(slots=True)
class SearchOffsetRequestHeader(CommandHeader):
    topic: str = field_required()
    queueId: int = field_required()
    timestamp: int = field_required()
    bname: str | None = None


@dataclass(slots=True)
class GetEarliestMsgStoretimeResponseHeader(CommandHeader):
    timestamp: int = field_required()


@dataclass(slots=True)
class ConsumerSendMsgBackRequestHeader(CommandHeader):
    offset: int = field_required()
    group: str = field_required()
    delayLevel: int = field_required()
    originMsgId: str | None = None
    originTopic: str | None = None
    unitMode: bool = False
    maxReconsumeTimes: int | None = None
    bname: str | None = None


@dataclass(slots=True)
class QueryMessageRequestHeader(CommandHeader):
    topic: str = field_required()
    key: str = field_required()
    maxNum: int = field_required()
    beginTimestamp: int = field_required()
    endTimestamp: int = field_required()


@dataclass(slots=True)
class QueryMessageResponseHeader(CommandHeader):
    indexLastUpdateTimestamp: int = field_required()
    indexLastUpdatePhyoffset: int = field_required()


@dataclass(slots=True)
class ViewMessageRequestHeader(CommandHeader):
    offset: int = field_required()


@dataclass(slots=True)
class NotifyConsumerIdsChangedRequestHeader(CommandHeader):
    consumerGroup: str = field_required()


@dataclass(slots=True)
class ResetOffsetRequestHeader(CommandHeader):
    topic: str = field_required()
    group: str = field_required()
    timestamp: int = field_required()
    isForce: bool = False


@dataclass(slots=True)
class GetConsumerStatusRequestHeader(CommandHeader):
    topic: str = field_required()
    group: str = field_required()
    clientAddr: str | None = None


@dataclass(slots=True)
class GetConsumerRunningInfoRequestHeader(CommandHeader):
    consumerGroup: str = field_required()
    clientId: str = field_required()
    jstackEnable: bool = False


@dataclass(slots=True)
class ConsumeMessageDirectlyResultRequestHeader(CommandHeader):
    consumerGroup: str = field_required()
    clientId: str | None = None
    msgId: str | None = None
    brokerName: str | None = None


# --- admin ------------------------------------------------------------------
@dataclass(slots=True)
class CreateTopicRequestHeader(CommandHeader):
    topic: str = field_required()
    defaultTopic: str = field_required()
    readQueueNums: int = field_required()
    writeQueueNums: int = field_required()
    perm: int = field_required()
    topicFilterType: str = field_required()
    topicSysFlag: int | None = None
    order: bool = False


@dataclass(slots=True)
class TopicRequestHeader(CommandHeader):
    """DELETE_TOPIC_IN_BROKER / GET_TOPIC_STATS_INFO / QUERY_TOPIC_CONSUME_BY_WHO."""

    topic: str = field_required()


@dataclass(slots=True)
class DeleteTopicFromNamesrvRequestHeader(CommandHeader):
    topic: str = field_required()
    clusterName: str | None = None


@dataclass(slots=True)
class DeleteSubscriptionGroupRequestHeader(CommandHeader):
    groupName: str = field_required()
    removeOffset: bool = False


@dataclass(slots=True)
class GetConsumeStatsRequestHeader(CommandHeader):
    consumerGroup: str = field_required()
    topic: str | None = None


@dataclass(slots=True)
class GetConsumerConnectionListRequestHeader(CommandHeader):
    consumerGroup: str = field_required()


@dataclass(slots=True)
class GetProducerConnectionListRequestHeader(CommandHeader):
    producerGroup: str = field_required()


@dataclass(slots=True)
class WipeWritePermOfBrokerRequestHeader(CommandHeader):
    brokerName: str = field_required()


@dataclass(slots=True)
class WipeWritePermOfBrokerResponseHeader(CommandHeader):
    wipeTopicCount: int = field_required()


@dataclass(slots=True)
class KVConfigRequestHeader(CommandHeader):
    """PUT_KV_CONFIG (with value) / DELETE_KV_CONFIG / GET_KV_CONFIG."""

    namespace: str = field_required()
    key: str = field_required()
    value: str | None = None


@dataclass(slots=True)
class InvokeBrokerToResetOffsetRequestHeader(CommandHeader):
    topic: str = field_required()
    group: str = field_required()
    timestamp: int = field_required()
    isForce: bool = False


@dataclass(slots=True)
class GetTopicsByClusterRequestHeader(CommandHeader):
    cluster: str = field_required()
