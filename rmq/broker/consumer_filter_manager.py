"""ConsumerFilterManager: SQL92 filter data of consumer groups, ``config/consumerFilter.json``.

Mirrors RocketMQ's ``ConsumerFilterManager``: one FilterData per (topic,
group) for subscriptions whose expression type is not TAG, registered from
heartbeats, marked dead when the group unregisters, dropped when dead longer
than filterDataCleanTimeSpan, persisted every 10 s and at shutdown.  rmq
does not compute the bloom-filter bit maps (enableCalcFilterBitMap), so
``bloomFilterData`` is only kept as read.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Any

from rmq.broker.config import BrokerConfig
from rmq.broker.config_manager import ConfigManager, dumps, parse_json
from rmq.common.logging import BROKER_LOGGER_NAME

log = logging.getLogger(BROKER_LOGGER_NAME)

TAG_TYPE = "TAG"
# On load, entries that never died are marked dead this long before the load
# (their consumers must heartbeat again to revive them).
LOAD_DEAD_MARGIN_MS = 30_000


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class ConsumerFilterData:
    consumerGroup: str
    topic: str
    expression: str | None = None
    expressionType: str | None = None
    bornTime: int = 0
    deadTime: int = 0
    clientVersion: int = 0
    bloomFilterData: dict | None = None

    @property
    def dead(self) -> bool:
        return self.deadTime >= self.bornTime

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "bloomFilterData": self.bloomFilterData,
            "bornTime": self.bornTime,
            "clientVersion": self.clientVersion,
            "consumerGroup": self.consumerGroup,
            "dead": self.dead,
            "deadTime": self.deadTime,
            "expression": self.expression,
            "expressionType": self.expressionType,
            "topic": self.topic,
        }

    @classmethod
    def from_json_obj(cls, obj: Any) -> ConsumerFilterData:
        if not isinstance(obj, dict):
            raise ValueError("filter data is not a JSON object")
        bloom = obj.get("bloomFilterData")
        return cls(
            consumerGroup=str(obj.get("consumerGroup") or ""),
            topic=str(obj.get("topic") or ""),
            expression=obj.get("expression"),
            expressionType=obj.get("expressionType"),
            bornTime=int(obj.get("bornTime") or 0),
            deadTime=int(obj.get("deadTime") or 0),
            clientVersion=int(obj.get("clientVersion") or 0),
            bloomFilterData=bloom if isinstance(bloom, dict) else None,
        )


def consumer_filter_path(store_root: str) -> str:
    return os.path.join(store_root, "config", "consumerFilter.json")


class ConsumerFilterManager(ConfigManager):
    def __init__(self, broker_config: BrokerConfig, store_root: str) -> None:
        self.broker_config = broker_config
        self.store_root = store_root
        # topic -> group -> filter data
        self.filter_data_by_topic: dict[str, dict[str, ConsumerFilterData]] = {}

    def register(self, topic: str, group: str, expression: str, expression_type: str,
                 client_version: int) -> bool:
        """Record a non-TAG subscription; returns True when something changed."""
        if not expression_type or expression_type == TAG_TYPE:
            return False
        groups = self.filter_data_by_topic.setdefault(topic, {})
        old = groups.get(group)
        if old is not None and not old.dead and old.clientVersion >= client_version \
                and old.expression == expression:
            return False
        now = _now_ms()
        groups[group] = ConsumerFilterData(group, topic, expression, expression_type, now, 0,
                                           client_version)
        return True

    def unregister(self, group: str) -> None:
        """The group's last consumer left: mark its filters dead (kept for a while)."""
        now = _now_ms()
        for groups in self.filter_data_by_topic.values():
            data = groups.get(group)
            if data is not None and not data.dead:
                data.deadTime = now

    def get(self, topic: str, group: str) -> ConsumerFilterData | None:
        return self.filter_data_by_topic.get(topic, {}).get(group)

    def clean_dead(self, now_ms: int | None = None) -> None:
        """Drop filter data dead longer than filterDataCleanTimeSpan."""
        now = _now_ms() if now_ms is None else now_ms
        span = self.broker_config.filterDataCleanTimeSpan
        for topic in list(self.filter_data_by_topic):
            groups = self.filter_data_by_topic[topic]
            for group in [g for g, d in groups.items() if d.dead and now - d.deadTime > span]:
                log.info("Remove dead filter data, topic=%s, group=%s", topic, group)
                del groups[group]
            if not groups:
                del self.filter_data_by_topic[topic]

    # ---- ConfigManager --------------------------------------------------
    def config_file_path(self) -> str:
        return consumer_filter_path(self.store_root)

    def encode(self, pretty: bool = False) -> str:
        self.clean_dead()
        return dumps({"filterDataByTopic": {
            topic: {"groupFilterData": {g: d.to_json_obj() for g, d in groups.items()},
                    "topic": topic}
            for topic, groups in self.filter_data_by_topic.items()
        }}, pretty)

    def decode(self, text: str) -> None:
        by_topic = parse_json(text).get("filterDataByTopic") or {}
        if not isinstance(by_topic, dict):
            raise ValueError("filterDataByTopic is not a JSON object")
        loaded: dict[str, dict[str, ConsumerFilterData]] = {}
        dead_at = _now_ms() - LOAD_DEAD_MARGIN_MS
        for topic, entry in by_topic.items():
            if not isinstance(entry, dict):
                raise ValueError(f"filter data of {topic} is not a JSON object")
            groups = entry.get("groupFilterData") or {}
            if not isinstance(groups, dict):
                raise ValueError(f"groupFilterData of {topic} is not a JSON object")
            for group, raw in groups.items():
                data = ConsumerFilterData.from_json_obj(raw)
                if data.deadTime == 0:
                    data.deadTime = dead_at
                loaded.setdefault(topic, {})[group] = data
        self.filter_data_by_topic = loaded
