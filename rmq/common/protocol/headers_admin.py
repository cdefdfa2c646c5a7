"""Custom headers of the administration requests brokers serve and of the
calls brokers make into clients (``common/protocol/header`` of RocketMQ 4.9.8).

The offset lookups (GET_MAX_OFFSET, GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP,
GET_EARLIEST_MSG_STORETIME) are consumer requests too: their headers live in
``headers_broker``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmq.common.protocol.header import CommandHeader, field_required


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
    attributes: str | None = None  # 5.x: "+message.type=FIFO,+k=v,-k"


@dataclass(slots=True)
class DeleteTopicRequestHeader(CommandHeader):
    topic: str = field_required()


@dataclass(slots=True)
class GetBrokerConfigResponseHeader(CommandHeader):
    version: str = field_required()


@dataclass(slots=True)
class DeleteSubscriptionGroupRequestHeader(CommandHeader):
    groupName: str = field_required()
    removeOffset: bool = False


@dataclass(slots=True)
class GetTopicStatsInfoRequestHeader(CommandHeader):
    topic: str = field_required()


@dataclass(slots=True)
class GetConsumerConnectionListRequestHeader(CommandHeader):
    consumerGroup: str = field_required()


@dataclass(slots=True)
class GetProducerConnectionListRequestHeader(CommandHeader):
    producerGroup: str = field_required()


@dataclass(slots=True)
class GetConsumeStatsRequestHeader(CommandHeader):
    consumerGroup: str = field_required()
    topic: str | None = None
    topicList: str | None = None  # 5.3.3: topics separated by ";", ``topic`` then ignored


@dataclass(slots=True)
class QueryTopicConsumeByWhoRequestHeader(CommandHeader):
    topic: str = field_required()


@dataclass(slots=True)
class QueryConsumeTimeSpanRequestHeader(CommandHeader):
    topic: str = field_required()
    group: str = field_required()


@dataclass(slots=True)
class QueryCorrectionOffsetHeader(CommandHeader):
    compareGroup: str = field_required()
    topic: str = field_required()
    filterGroups: str | None = None


@dataclass(slots=True)
class CloneGroupOffsetRequestHeader(CommandHeader):
    srcGroup: str = field_required()
    destGroup: str = field_required()
    topic: str | None = None
    offline: bool = False


@dataclass(slots=True)
class ViewBrokerStatsDataRequestHeader(CommandHeader):
    statsName: str = field_required()
    statsKey: str = field_required()


@dataclass(slots=True)
class GetConsumeStatsInBrokerHeader(CommandHeader):
    isOrder: bool = field_required()


@dataclass(slots=True)
class QueryConsumeQueueRequestHeader(CommandHeader):
    topic: str | None = None
    queueId: int = 0
    index: int = 0
    count: int = 0
    consumerGroup: str | None = None


@dataclass(slots=True)
class ResumeCheckHalfMessageRequestHeader(CommandHeader):
    msgId: str | None = None


@dataclass(slots=True)
class CreateAccessConfigRequestHeader(CommandHeader):
    accessKey: str = field_required()
    secretKey: str | None = None
    whiteRemoteAddress: str | None = None
    admin: bool = False
    defaultTopicPerm: str | None = None
    defaultGroupPerm: str | None = None
    topicPerms: str | None = None
    groupPerms: str | None = None


@dataclass(slots=True)
class DeleteAccessConfigRequestHeader(CommandHeader):
    accessKey: str = field_required()


@dataclass(slots=True)
class UpdateGlobalWhiteAddrsConfigRequestHeader(CommandHeader):
    globalWhiteAddrs: str = field_required()
    aclFileFullPath: str = field_required()


@dataclass(slots=True)
class GetBrokerAclConfigResponseHeader(CommandHeader):
    """GET_BROKER_CLUSTER_ACL_INFO: ``version`` is the default file's DataVersion
    JSON, ``allAclFileVersion`` a JSON map of file path -> DataVersion."""

    version: str = field_required()
    allAclFileVersion: str | None = None
    brokerName: str = field_required()
    brokerAddr: str = field_required()
    clusterName: str = field_required()


# --- calls into clients (Broker2Client) and the admin requests that trigger them ---
@dataclass(slots=True)
class ResetOffsetRequestHeader(CommandHeader):
    """INVOKE_BROKER_TO_RESET_OFFSET and the RESET_CONSUMER_CLIENT_OFFSET it pushes."""

    topic: str = field_required()
    group: str = field_required()
    timestamp: int = field_required()
    isForce: bool = False


@dataclass(slots=True)
class GetConsumerStatusRequestHeader(CommandHeader):
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS and GET_CONSUMER_STATUS_FROM_CLIENT."""

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
