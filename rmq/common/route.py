"""Route bodies the name server serves: QueueData, BrokerData, TopicRouteData,
ClusterInfo, TopicList and KVTable (``common/protocol/route`` and ``body`` of
RocketMQ 4.9.8), with their fastjson shapes.

``BrokerData.brokerAddrs`` maps brokerId (0 = master) to ``"ip:port"``; fastjson
writes those integer keys unquoted in legacy mode (``{0:"a:1"}``) and quoted in
standard mode (``{"0":"a:1"}``) -- see ``rmq.common.fastjson``.  Readers accept
both, and numbers given as strings, as fastjson does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rmq.common import fastjson


class RouteDataError(ValueError):
    """A route-shaped JSON body with the wrong types."""


def _int(obj: dict, name: str, default: int = 0) -> int:
    value = obj.get(name)
    if value is None:
        return default
    try:
        if isinstance(value, bool):
            raise ValueError
        return int(value)
    except (TypeError, ValueError):
        raise RouteDataError(f"{name} is not a number: {value!r}") from None


def _str(obj: dict, name: str) -> str | None:
    value = obj.get(name)
    if value is not None and not isinstance(value, str):
        raise RouteDataError(f"{name} is not a string: {value!r}")
    return value


def _dict(value: Any, name: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RouteDataError(f"{name} is not a JSON object")
    return value


def _list(value: Any, name: str) -> list:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RouteDataError(f"{name} is not a JSON array")
    return value


@dataclass(slots=True)
class QueueData:
    brokerName: str
    readQueueNums: int = 0
    writeQueueNums: int = 0
    perm: int = 0
    topicSysFlag: int = 0

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "brokerName": self.brokerName,
            "perm": self.perm,
            "readQueueNums": self.readQueueNums,
            "topicSysFlag": self.topicSysFlag,
            "writeQueueNums": self.writeQueueNums,
        }

    @classmethod
    def from_json_obj(cls, obj: Any) -> QueueData:
        obj = _dict(obj, "QueueData")
        return cls(_str(obj, "brokerName") or "", _int(obj, "readQueueNums"),
                   _int(obj, "writeQueueNums"), _int(obj, "perm"), _int(obj, "topicSysFlag"))


@dataclass(slots=True)
class BrokerData:
    cluster: str
    brokerName: str
    brokerAddrs: dict[int, str] = field(default_factory=dict)

    def copy(self) -> BrokerData:
        return BrokerData(self.cluster, self.brokerName, dict(self.brokerAddrs))

    def to_json_obj(self) -> dict[str, Any]:
        return {"brokerAddrs": self.brokerAddrs, "brokerName": self.brokerName,
                "cluster": self.cluster}

    @classmethod
    def from_json_obj(cls, obj: Any) -> BrokerData:
        obj = _dict(obj, "BrokerData")
        addrs: dict[int, str] = {}
        for k, v in _dict(obj.get("brokerAddrs"), "brokerAddrs").items():
            try:
                addrs[int(k)] = v
            except ValueError:
                raise RouteDataError(f"brokerAddrs key is not a broker id: {k!r}") from None
        return cls(_str(obj, "cluster") or "", _str(obj, "brokerName") or "", addrs)


@dataclass(slots=True)
class TopicRouteData:
    queueDatas: list[QueueData] = field(default_factory=list)
    brokerDatas: list[BrokerData] = field(default_factory=list)
    filterServerTable: dict[str, list[str]] = field(default_factory=dict)
    orderTopicConf: str | None = None

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "brokerDatas": [b.to_json_obj() for b in self.brokerDatas],
            "filterServerTable": self.filterServerTable,
            "orderTopicConf": self.orderTopicConf,
            "queueDatas": [q.to_json_obj() for q in self.queueDatas],
        }

    def encode(self, standard: bool = False) -> bytes:
        return fastjson.dumps(self.to_json_obj(), standard=standard)

    @classmethod
    def from_json_obj(cls, obj: Any) -> TopicRouteData:
        obj = _dict(obj, "TopicRouteData")
        return cls(
            [QueueData.from_json_obj(q) for q in _list(obj.get("queueDatas"), "queueDatas")],
            [BrokerData.from_json_obj(b) for b in _list(obj.get("brokerDatas"), "brokerDatas")],
            {k: list(v) for k, v in _dict(obj.get("filterServerTable"),
                                          "filterServerTable").items()},
            _str(obj, "orderTopicConf"),
        )

    @classmethod
    def decode(cls, data: bytes | memoryview | str) -> TopicRouteData:
        return cls.from_json_obj(fastjson.loads(data))


@dataclass(slots=True)
class ClusterInfo:
    brokerAddrTable: dict[str, BrokerData] = field(default_factory=dict)
    clusterAddrTable: dict[str, set[str]] = field(default_factory=dict)

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "brokerAddrTable": {k: v.to_json_obj() for k, v in self.brokerAddrTable.items()},
            "clusterAddrTable": {k: sorted(v) for k, v in self.clusterAddrTable.items()},
        }

    def encode(self) -> bytes:
        """fastjson default encoding (unquoted broker-id keys), as Java sends it."""
        return fastjson.dumps(self.to_json_obj())

    @classmethod
    def from_json_obj(cls, obj: Any) -> ClusterInfo:
        obj = _dict(obj, "ClusterInfo")
        return cls(
            {k: BrokerData.from_json_obj(v)
             for k, v in _dict(obj.get("brokerAddrTable"), "brokerAddrTable").items()},
            {k: set(_list(v, "clusterAddrTable"))
             for k, v in _dict(obj.get("clusterAddrTable"), "clusterAddrTable").items()},
        )

    @classmethod
    def decode(cls, data: bytes | memoryview | str) -> ClusterInfo:
        return cls.from_json_obj(fastjson.loads(data))


@dataclass(slots=True)
class TopicList:
    topicList: list[str] = field(default_factory=list)
    brokerAddr: str | None = None

    def to_json_obj(self) -> dict[str, Any]:
        return {"brokerAddr": self.brokerAddr, "topicList": self.topicList}

    def encode(self) -> bytes:
        return fastjson.dumps(self.to_json_obj())

    @classmethod
    def from_json_obj(cls, obj: Any) -> TopicList:
        obj = _dict(obj, "TopicList")
        return cls(list(_list(obj.get("topicList"), "topicList")), _str(obj, "brokerAddr"))

    @classmethod
    def decode(cls, data: bytes | memoryview | str) -> TopicList:
        return cls.from_json_obj(fastjson.loads(data))


@dataclass(slots=True)
class KVTable:
    table: dict[str, str] = field(default_factory=dict)

    def to_json_obj(self) -> dict[str, Any]:
        return {"table": self.table}

    def encode(self) -> bytes:
        return fastjson.dumps(self.to_json_obj())

    @classmethod
    def from_json_obj(cls, obj: Any) -> KVTable:
        obj = _dict(obj, "KVTable")
        return cls({k: v for k, v in _dict(obj.get("table"), "table").items()})

    @classmethod
    def decode(cls, data: bytes | memoryview | str) -> KVTable:
        return cls.from_json_obj(fastjson.loads(data))
