"""ConsumerFilterManager: SQL92 filter data of consumer groups, ``config/consumerFilter.json``.

Mirrors RocketMQ's ``ConsumerFilterManager``: one FilterData per (topic,
group) for subscriptions whose expression type is not TAG, registered from
heartbeats with the expression compiled once (``rmq.filter``), marked dead
when the group unregisters, dropped when dead longer than
filterDataCleanTimeSpan, persisted every 10 s and at shutdown.  An
expression that does not compile is not registered (pulls then answer
FILTER_DATA_NOT_EXIST).

Each filter data gets the bloom-filter bits of ``"<group>#<topic>"``
(maxErrorRateOfBloomFilter, expectConsumerNumUseFilter); with
enableCalcFilterBitMap, ``calc_bitmap`` gives the store each dispatched
message's bitmap of the groups whose expression it matches
(``CommitLogDispatcherCalcBitMap``), which the consume queue's ext units keep
and pulls check (``consume_queue_filter``).  A file written with another
bloom filter is ignored on load, as its bitmaps would mean nothing.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rmq.broker.config import BrokerConfig
from rmq.client.heartbeat import SubscriptionData
from rmq.common.codes import ResponseCode as RC
from rmq.common.config_manager import ConfigManager, dumps, parse_json
from rmq.common.logging import BROKER_LOGGER_NAME
from rmq.filter import FILTERS, BooleanExpression, FilterError
from rmq.filter.bloom import BloomFilter, BloomFilterData
from rmq.filter.message_filter import (
    BitmapFilter,
    RecordFilter,
    expression_filter,
    retry_filter,
    retry_group,
)

log = logging.getLogger(BROKER_LOGGER_NAME)

TAG_TYPE = "TAG"
# On load, every entry is marked dead this long before the load
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
    bloomFilterData: BloomFilterData | None = None
    compiled: BooleanExpression | None = field(default=None, compare=False)

    @property
    def dead(self) -> bool:
        return self.deadTime >= self.bornTime

    def compile(self) -> None:
        """Compile the expression (FilterError when it does not compile)."""
        self.compiled = FILTERS.compile(self.expressionType, self.expression)

    def to_json_obj(self) -> dict[str, Any]:
        return {
            "bloomFilterData": (self.bloomFilterData.to_json_obj()
                                if self.bloomFilterData is not None else None),
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
        bloom = BloomFilterData.from_json_obj(obj.get("bloomFilterData"))
        return cls(
            consumerGroup=str(obj.get("consumerGroup") or ""),
            topic=str(obj.get("topic") or ""),
            expression=obj.get("expression"),
            expressionType=obj.get("expressionType"),
            bornTime=int(obj.get("bornTime") or 0),
            deadTime=int(obj.get("deadTime") or 0),
            clientVersion=int(obj.get("clientVersion") or 0),
            bloomFilterData=bloom,
        )


def consumer_filter_path(store_root: str) -> str:
    return os.path.join(store_root, "config", "consumerFilter.json")


class ConsumerFilterManager(ConfigManager):
    def __init__(self, broker_config: BrokerConfig, store_root: str) -> None:
        self.broker_config = broker_config
        self.store_root = store_root
        self.bloom = BloomFilter(broker_config.maxErrorRateOfBloomFilter,
                                 broker_config.expectConsumerNumUseFilter)
        # topic -> group -> filter data
        self.filter_data_by_topic: dict[str, dict[str, ConsumerFilterData]] = {}

    @staticmethod
    def build(topic: str, group: str, expression: str | None, expression_type: str | None,
              client_version: int) -> ConsumerFilterData | None:
        """Fresh filter data with its compiled expression; None for TAG
        subscriptions and for expressions that do not compile."""
        if not expression_type or expression_type == TAG_TYPE:
            return None
        data = ConsumerFilterData(group, topic, expression, expression_type, _now_ms(), 0,
                                  client_version)
        try:
            data.compile()
        except FilterError as exc:
            log.error("parse error: expr=%s, topic=%s, group=%s, error=%s", expression, topic,
                      group, exc)
            return None
        return data

    def register(self, topic: str, group: str, expression: str | None, expression_type: str,
                 client_version: int) -> bool:
        """Record a non-TAG subscription from a heartbeat; True when the filter
        data changed or came back to life.  Older client versions are ignored,
        a new expression replaces the old one (or removes it when it does not
        compile, so that the client hears of the error)."""
        if not expression_type or expression_type == TAG_TYPE or not expression:
            return False
        groups = self.filter_data_by_topic.setdefault(topic, {})
        old = groups.get(group)
        if old is not None and client_version <= old.clientVersion:
            if client_version == old.clientVersion and old.dead:
                old.deadTime = 0
                return True
            return False
        bloom = self.bloom.generate(f"{group}#{topic}")
        if old is not None and old.expression == expression \
                and old.expressionType == expression_type and old.bloomFilterData == bloom:
            old.clientVersion = client_version
            old.deadTime = 0
            return True
        data = self.build(topic, group, expression, expression_type, client_version)
        if data is None:
            groups.pop(group, None)
            if not groups:
                del self.filter_data_by_topic[topic]
            return False
        data.bloomFilterData = bloom
        groups[group] = data
        log.info("Consumer filter registered: topic=%s, group=%s, expression=%s", topic, group,
                 expression)
        return True

    def pull_filter(self, topic: str, group: str, sub: SubscriptionData, from_request: bool,
                    sub_version: int) -> tuple[tuple[int, str] | None, RecordFilter | None]:
        """What a pull filters stored records with (the SQL92 part of 4.9.8's
        PullMessageProcessor): ``(refusal, filter)`` where refusal is a
        (response code, remark) and a None filter lets everything through.

        A subscription carried by the request is compiled on the spot (cached
        by expression); otherwise the group's filter data must exist and be at
        least as new as the pull's subVersion.  With filterSupportRetry, the
        records of ``%RETRY%group`` are matched with the group's selector of
        their original topic."""
        if self.broker_config.filterSupportRetry:
            retry_of = retry_group(topic)
            if retry_of is not None:
                return None, retry_filter(retry_of, self.compiled_of)
        if not sub.expression_type or sub.expression_type == TAG_TYPE:
            return None, None
        if from_request:
            try:
                return None, FILTERS.compile(sub.expression_type, sub.sub_string).matches
            except FilterError:
                return (RC.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed"), None
        data = self.get(topic, group)
        if data is None:
            return (RC.FILTER_DATA_NOT_EXIST,
                    "The broker's consumer filter data is not exist!Your expression may be wrong!"), None
        if data.clientVersion < sub_version:
            log.warning("The broker's consumer filter data is not latest, group: %s, topic: %s, "
                        "serverV: %d, clientV: %d", group, topic, data.clientVersion, sub_version)
            return (RC.FILTER_DATA_NOT_LATEST, "the consumer's consumer filter data not latest"), None
        return None, expression_filter(data.compiled)

    def consume_queue_filter(self, topic: str, group: str, sub: SubscriptionData,
                             from_request: bool) -> BitmapFilter | None:
        """The bitmap filter of a SQL92 pull over a consume queue with ext
        units: only for the group's registered filter data (a subscription
        carried by the request has no bloom bits, as in 4.9.8)."""
        if from_request or not sub.expression_type or sub.expression_type == TAG_TYPE:
            return None
        data = self.get(topic, group)
        if data is None or data.expression is None or data.compiled is None \
                or data.bloomFilterData is None:
            return None
        return BitmapFilter(self.bloom, data.bloomFilterData, data.bornTime)

    def calc_bitmap(self, topic: str, properties: dict[str, str]) -> bytes | None:
        """``CommitLogDispatcherCalcBitMap``: the bloom bits of every group of the
        topic whose expression the message matches (None when
        enableCalcFilterBitMap is off or the topic has no filter data)."""
        if not self.broker_config.enableCalcFilterBitMap:
            return None
        groups = self.filter_data_by_topic.get(topic)
        if not groups:
            return None
        bits = bytearray(self.bloom.byte_length)
        for data in list(groups.values()):
            if data.compiled is None or data.bloomFilterData is None:
                log.error("[BUG] Consumer in filter manager has no compiled expression or bloom "
                          "data! topic=%s, group=%s", topic, data.consumerGroup)
                continue
            if data.compiled.matches(properties):
                self.bloom.hash_to(data.bloomFilterData, bits)
        return bytes(bits)

    def compiled_of(self, topic: str, group: str) -> BooleanExpression | None:
        data = self.get(topic, group)
        return data.compiled if data is not None else None

    def register_group(self, group: str, subscriptions: Iterable[Any]) -> None:
        """A group's heartbeat: register each subscription (objects with
        topic, sub_string, expression_type, sub_version), then mark dead the
        group's live filter data of topics it no longer subscribes to."""
        topics = set()
        for sub in subscriptions:
            topics.add(sub.topic)
            self.register(sub.topic, group, sub.sub_string, sub.expression_type, sub.sub_version)
        now = _now_ms()
        for topic, groups in self.filter_data_by_topic.items():
            data = groups.get(group)
            if data is not None and topic not in topics and not data.dead:
                data.deadTime = now
                log.info("Consumer filter changed: %s, make illegal topic dead: %s", group, topic)

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
        bloom_changed = False
        for topic, entry in by_topic.items():
            if not isinstance(entry, dict):
                raise ValueError(f"filter data of {topic} is not a JSON object")
            groups = entry.get("groupFilterData") or {}
            if not isinstance(groups, dict):
                raise ValueError(f"groupFilterData of {topic} is not a JSON object")
            for group, raw in groups.items():
                data = ConsumerFilterData.from_json_obj(raw)
                try:
                    data.compile()
                except FilterError as exc:
                    log.error("load filter data error, topic=%s, group=%s: %s", topic, group, exc)
                if not self.bloom.is_valid(data.bloomFilterData):
                    bloom_changed = True
                # every loaded entry is dead until its consumers heartbeat again
                # (never earlier than its birth, or it would count as alive)
                data.deadTime = max(dead_at, data.bornTime)
                loaded.setdefault(topic, {})[group] = data
        if bloom_changed:
            log.info("Bloom filter is changed! So ignore all filter data persisted!")
            return
        self.filter_data_by_topic = loaded
