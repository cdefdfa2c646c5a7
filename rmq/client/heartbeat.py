"""Heartbeat and subscription bodies (``HeartbeatData``, ``ConsumerData``,
``ProducerData``, ``SubscriptionData``, ``FilterAPI``) and the consumer enums.

JSON is written the way fastjson writes it (alphabetical keys, enum names, no
nulls) so a Java broker reads it unchanged; enums are read from names or ordinals.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field

import orjson

from rmq.common.java import string_hash

SUB_ALL = "*"
EXPRESSION_TAG = "TAG"
EXPRESSION_SQL92 = "SQL92"


class ConsumeType(enum.IntEnum):
    CONSUME_ACTIVELY = 0
    CONSUME_PASSIVELY = 1


class MessageModel(enum.IntEnum):
    BROADCASTING = 0
    CLUSTERING = 1


class ConsumeFromWhere(enum.IntEnum):
    CONSUME_FROM_LAST_OFFSET = 0
    CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST = 1
    CONSUME_FROM_MIN_OFFSET = 2
    CONSUME_FROM_MAX_OFFSET = 3
    CONSUME_FROM_FIRST_OFFSET = 4
    CONSUME_FROM_TIMESTAMP = 5


def parse_enum(cls: type[enum.IntEnum], value) -> enum.IntEnum:
    """An enum from its name or its ordinal, as fastjson accepts both."""
    if isinstance(value, str) and not value.isdigit():
        return cls[value]
    return cls(int(value))


def text_field(obj: dict, key: str) -> str:
    """A field that must be a JSON string: a group or topic name the broker
    keys its tables with (a ValueError naming it otherwise, where 4.9.8
    fails later with a NullPointerException)."""
    value = obj[key]
    if not isinstance(value, str):
        raise ValueError(f"{key} is not a string: {value!r}")
    return value


@dataclass(slots=True)
class SubscriptionData:
    """One topic subscription: the expression, its tags and their hash codes."""

    topic: str
    sub_string: str = SUB_ALL
    tags_set: list[str] = field(default_factory=list)
    code_set: list[int] = field(default_factory=list)
    sub_version: int = 0
    expression_type: str = EXPRESSION_TAG
    class_filter_mode: bool = False

    def to_json_obj(self) -> dict:
        return {
            "classFilterMode": self.class_filter_mode,
            "codeSet": self.code_set,
            "expressionType": self.expression_type,
            "subString": self.sub_string,
            "subVersion": self.sub_version,
            "tagsSet": self.tags_set,
            "topic": self.topic,
        }

    @classmethod
    def from_json_obj(cls, obj: dict) -> SubscriptionData:
        sub_string = obj.get("subString") or SUB_ALL
        tags = list(obj.get("tagsSet") or [])
        if not isinstance(sub_string, str) or not all(isinstance(t, str) for t in tags):
            raise ValueError(f"subString or tagsSet is not text: {sub_string!r}, {tags!r}")
        return cls(
            topic=text_field(obj, "topic"),
            sub_string=sub_string,
            tags_set=tags,
            code_set=[int(c) for c in obj.get("codeSet") or []],
            sub_version=int(obj.get("subVersion") or 0),
            expression_type=obj.get("expressionType") or EXPRESSION_TAG,
            class_filter_mode=bool(obj.get("classFilterMode", False)),
        )

    def matches_tag(self, tag: str | None) -> bool:
        """Client-side re-filter of pulled messages (``PullAPIWrapper``)."""
        if not self.tags_set or self.sub_string == SUB_ALL:
            return True
        return tag is not None and tag in self.tags_set


def build_subscription(topic: str, expression: str | None,
                       expression_type: str = EXPRESSION_TAG) -> SubscriptionData:
    """``FilterAPI.build``: for TAG ``*``/empty means everything, else tags
    joined by ``||``; any other type (SQL92) keeps the expression, which must
    not be empty."""
    sub = SubscriptionData(topic=topic, sub_version=int(time.time() * 1000),
                           expression_type=expression_type)
    if expression_type != EXPRESSION_TAG:
        if not expression:
            raise ValueError(f"Expression can't be null! {expression_type}")
        sub.sub_string = expression
        return sub
    if not expression or expression.strip() == SUB_ALL:
        sub.sub_string = SUB_ALL
        return sub
    sub.sub_string = expression
    for tag in expression.split("||"):
        tag = tag.strip()
        if tag and tag not in sub.tags_set:
            sub.tags_set.append(tag)
            sub.code_set.append(string_hash(tag))
    if not sub.tags_set:
        raise ValueError(f"subString split error: {expression!r}")
    return sub


@dataclass(slots=True)
class ConsumerData:
    group_name: str
    consume_type: ConsumeType
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    subscriptions: list[SubscriptionData] = field(default_factory=list)
    unit_mode: bool = False

    def to_json_obj(self) -> dict:
        return {
            "consumeFromWhere": self.consume_from_where.name,
            "consumeType": self.consume_type.name,
            "groupName": self.group_name,
            "messageModel": self.message_model.name,
            "subscriptionDataSet": [s.to_json_obj() for s in self.subscriptions],
            "unitMode": self.unit_mode,
        }

    @classmethod
    def from_json_obj(cls, obj: dict) -> ConsumerData:
        return cls(
            group_name=text_field(obj, "groupName"),
            consume_type=parse_enum(ConsumeType, obj.get("consumeType", 1)),
            message_model=parse_enum(MessageModel, obj.get("messageModel", 1)),
            consume_from_where=parse_enum(ConsumeFromWhere, obj.get("consumeFromWhere", 0)),
            subscriptions=[SubscriptionData.from_json_obj(s)
                           for s in obj.get("subscriptionDataSet") or []],
            unit_mode=bool(obj.get("unitMode", False)),
        )


@dataclass(slots=True)
class HeartbeatData:
    client_id: str
    producer_groups: list[str] = field(default_factory=list)
    consumers: list[ConsumerData] = field(default_factory=list)

    def encode(self) -> bytes:
        return orjson.dumps({
            "clientID": self.client_id,
            "consumerDataSet": [c.to_json_obj() for c in self.consumers],
            "producerDataSet": [{"groupName": g} for g in self.producer_groups],
        })

    @classmethod
    def decode(cls, body: bytes) -> HeartbeatData:
        obj = orjson.loads(body)
        return cls(
            client_id=text_field(obj, "clientID"),
            producer_groups=[text_field(p, "groupName") for p in obj.get("producerDataSet") or []],
            consumers=[ConsumerData.from_json_obj(c) for c in obj.get("consumerDataSet") or []],
        )
