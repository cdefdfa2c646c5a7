"""Custom headers of the name-server requests (``common/protocol/header/namesrv``
of RocketMQ 4.9.8)."""

from __future__ import annotations

from dataclasses import dataclass

from rmq.common.protocol.header import CommandHeader, field_required


@dataclass(slots=True)
class RegisterBrokerRequestHeader(CommandHeader):
    brokerName: str = field_required()
    brokerAddr: str = field_required()
    clusterName: str = field_required()
    haServerAddr: str = field_required()
    brokerId: int = field_required()
    compressed: bool = False
    bodyCrc32: int = 0


@dataclass(slots=True)
class RegisterBrokerResponseHeader(CommandHeader):
    haServerAddr: str | None = None
    masterAddr: str | None = None


@dataclass(slots=True)
class UnRegisterBrokerRequestHeader(CommandHeader):
    brokerName: str = field_required()
    brokerAddr: str = field_required()
    clusterName: str = field_required()
    brokerId: int = field_required()


@dataclass(slots=True)
class QueryDataVersionRequestHeader(CommandHeader):
    brokerName: str = field_required()
    brokerAddr: str = field_required()
    clusterName: str = field_required()
    brokerId: int = field_required()


@dataclass(slots=True)
class QueryDataVersionResponseHeader(CommandHeader):
    changed: bool = field_required()


@dataclass(slots=True)
class GetRouteInfoRequestHeader(CommandHeader):
    topic: str = field_required()
    acceptStandardJsonOnly: bool | None = None


@dataclass(slots=True)
class PutKVConfigRequestHeader(CommandHeader):
    namespace: str = field_required()
    key: str = field_required()
    value: str = field_required()


@dataclass(slots=True)
class GetKVConfigRequestHeader(CommandHeader):
    namespace: str = field_required()
    key: str = field_required()


@dataclass(slots=True)
class GetKVConfigResponseHeader(CommandHeader):
    value: str | None = None


@dataclass(slots=True)
class DeleteKVConfigRequestHeader(CommandHeader):
    namespace: str = field_required()
    key: str = field_required()


@dataclass(slots=True)
class GetKVListByNamespaceRequestHeader(CommandHeader):
    namespace: str = field_required()


@dataclass(slots=True)
class DeleteTopicFromNamesrvRequestHeader(CommandHeader):
    topic: str = field_required()
    clusterName: str | None = None


@dataclass(slots=True)
class WipeWritePermOfBrokerRequestHeader(CommandHeader):
    brokerName: str = field_required()


@dataclass(slots=True)
class WipeWritePermOfBrokerResponseHeader(CommandHeader):
    wipeTopicCount: int = field_required()


@dataclass(slots=True)
class AddWritePermOfBrokerRequestHeader(CommandHeader):
    brokerName: str = field_required()


@dataclass(slots=True)
class AddWritePermOfBrokerResponseHeader(CommandHeader):
    addTopicCount: int = field_required()


@dataclass(slots=True)
class GetTopicsByClusterRequestHeader(CommandHeader):
    cluster: str = field_required()
