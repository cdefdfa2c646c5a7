"""Custom headers of the messaging and offset requests between clients and
brokers (``common/protocol/header`` of RocketMQ 4.9.8).

The client builds the two hot requests (SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE
and PULL_MESSAGE) as plain dicts (``rmq.client.headers``); the classes here
are the reference their field names are checked against.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmq.common.protocol.header import CommandHeader, field_required


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


@dataclass(slots=True)
class SendMessageResponseHeader(CommandHeader):
    msgId: str = field_required()
    queueId: int = field_required()
    queueOffset: int = field_required()
    transactionId: str | None = None
    recallHandle: str | None = None  # 5.3.3: a send of a timer message


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


@dataclass(slots=True)
class PullMessageResponseHeader(CommandHeader):
    suggestWhichBrokerId: int = field_required()
    nextBeginOffset: int = field_required()
    minOffset: int = field_required()
    maxOffset: int = field_required()


@dataclass(slots=True)
class UnregisterClientRequestHeader(CommandHeader):
    clientID: str = field_required()
    producerGroup: str | None = None
    consumerGroup: str | None = None


@dataclass(slots=True)
class GetConsumerListByGroupRequestHeader(CommandHeader):
    consumerGroup: str = field_required()


@dataclass(slots=True)
class NotifyConsumerIdsChangedRequestHeader(CommandHeader):
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


# END_TRANSACTION (37) and CHECK_TRANSACTION_STATE (39), PROTOCOL.md 3.2.5 / 3.2.6
@dataclass(slots=True)
class EndTransactionRequestHeader(CommandHeader):
    producerGroup: str = field_required()
    tranStateTableOffset: int = field_required()
    commitLogOffset: int = field_required()
    commitOrRollback: int = field_required()
    fromTransactionCheck: bool = False
    msgId: str = field_required()
    transactionId: str | None = None
    recallHandle: str | None = None  # 5.3.3: a send of a timer message
    bname: str | None = None


@dataclass(slots=True)
class CheckTransactionStateRequestHeader(CommandHeader):
    tranStateTableOffset: int = field_required()
    commitLogOffset: int = field_required()
    msgId: str | None = None
    transactionId: str | None = None
    recallHandle: str | None = None  # 5.3.3: a send of a timer message
    offsetMsgId: str | None = None
    bname: str | None = None


# PUSH_REPLY_MESSAGE_TO_CLIENT (326): the broker hands a reply to the requester
@dataclass(slots=True)
class ReplyMessageRequestHeader(CommandHeader):
    producerGroup: str = field_required()
    topic: str = field_required()
    defaultTopic: str = field_required()
    defaultTopicQueueNums: int = field_required()
    queueId: int = field_required()
    sysFlag: int = field_required()
    bornTimestamp: int = field_required()
    flag: int = field_required()
    properties: str | None = None
    reconsumeTimes: int | None = None
    unitMode: bool = False
    bornHost: str = field_required()
    storeHost: str = field_required()
    storeTimestamp: int = field_required()
