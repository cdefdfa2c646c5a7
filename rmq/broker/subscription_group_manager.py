"""SubscriptionGroupManager: consumer groups and ``config/subscriptionGroup.json``.

Mirrors RocketMQ's ``SubscriptionGroupManager`` and ``SubscriptionGroupConfig``:
the groups 4.9.8 knows from start, auto-creation of unknown groups on first
use (autoCreateSubscriptionGroup, or any ``CID_RMQ_SYS_`` group), a
DataVersion bumped on every change and a persist after each change.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

from rmq.broker.config import BrokerConfig
from rmq.common.config_manager import ConfigManager, dumps, parse_json
from rmq.common.data_version import DataVersion
from rmq.common.java import BUILTIN_GROUPS, is_sys_consumer_group
from rmq.common.logging import BROKER_LOGGER_NAME
from rmq.store.multi_dispatch import is_lmq

log = logging.getLogger(BROKER_LOGGER_NAME)

DEFAULT_GROUPS = BUILTIN_GROUPS  # created when the table is new


def _as_bool(value: Any, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, str):
        return value.lower() == "true"
    return bool(value)


def _as_int(value: Any, default: int, name: str) -> int:
    if value is None:
        return default
    if isinstance(value, bool):
        raise ValueError(f"{name} is not a number: {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} is not a number: {value!r}") from None


def _as_dict(value: Any, default: dict, name: str) -> dict:
    if value is None:
        return dict(default)
    if not isinstance(value, dict):
        raise ValueError(f"{name} is not a JSON object: {value!r}")
    return value


@dataclass(slots=True)
class SubscriptionGroupConfig:
    """One consumer group's settings (``SubscriptionGroupConfig``), 4.9.8 defaults."""

    groupName: str
    consumeEnable: bool = True
    consumeFromMinEnable: bool = True
    consumeBroadcastEnable: bool = True
    retryQueueNums: int = 1
    retryMaxTimes: int = 16
    brokerId: int = 0
    whichBrokerWhenConsumeSlowly: int = 1
    notifyConsumerIdsChangedEnable: bool = True
    # 5.x fields (SubscriptionGroupConfig of 5.3.3)
    consumeMessageOrderly: bool = False
    groupSysFlag: int = 0
    consumeTimeoutMinute: int = 15
    groupRetryPolicy: dict[str, Any] = field(default_factory=lambda: {"type": "CUSTOMIZED"})
    subscriptionDataSet: list[Any] | None = None
    attributes: dict[str, str] = field(default_factory=dict)

    def to_json_obj(self) -> dict[str, Any]:
        """fastjson's alphabetical order, null properties left out (5.3.3)."""
        obj: dict[str, Any] = {
            "attributes": dict(self.attributes),
            "brokerId": self.brokerId,
            "consumeBroadcastEnable": self.consumeBroadcastEnable,
            "consumeEnable": self.consumeEnable,
            "consumeFromMinEnable": self.consumeFromMinEnable,
            "consumeMessageOrderly": self.consumeMessageOrderly,
            "consumeTimeoutMinute": self.consumeTimeoutMinute,
            "groupName": self.groupName,
            "groupRetryPolicy": self.groupRetryPolicy,
            "groupSysFlag": self.groupSysFlag,
            "notifyConsumerIdsChangedEnable": self.notifyConsumerIdsChangedEnable,
            "retryMaxTimes": self.retryMaxTimes,
            "retryQueueNums": self.retryQueueNums,
        }
        if self.subscriptionDataSet is not None:
            obj["subscriptionDataSet"] = self.subscriptionDataSet
        obj["whichBrokerWhenConsumeSlowly"] = self.whichBrokerWhenConsumeSlowly
        return obj

    @classmethod
    def from_json_obj(cls, obj: Any, name: str | None = None) -> SubscriptionGroupConfig:
        """Lenient like fastjson: missing properties keep their defaults."""
        if not isinstance(obj, dict):
            raise ValueError("subscription group config is not a JSON object")
        group = obj.get("groupName", name)
        if not isinstance(group, str) or not group:
            raise ValueError("subscription group config has no groupName")
        return cls(
            groupName=group,
            consumeEnable=_as_bool(obj.get("consumeEnable"), True),
            consumeFromMinEnable=_as_bool(obj.get("consumeFromMinEnable"), True),
            consumeBroadcastEnable=_as_bool(obj.get("consumeBroadcastEnable"), True),
            retryQueueNums=_as_int(obj.get("retryQueueNums"), 1, "retryQueueNums"),
            retryMaxTimes=_as_int(obj.get("retryMaxTimes"), 16, "retryMaxTimes"),
            brokerId=_as_int(obj.get("brokerId"), 0, "brokerId"),
            whichBrokerWhenConsumeSlowly=_as_int(obj.get("whichBrokerWhenConsumeSlowly"), 1,
                                                 "whichBrokerWhenConsumeSlowly"),
            notifyConsumerIdsChangedEnable=_as_bool(obj.get("notifyConsumerIdsChangedEnable"),
                                                    True),
            consumeMessageOrderly=_as_bool(obj.get("consumeMessageOrderly"), False),
            groupSysFlag=_as_int(obj.get("groupSysFlag"), 0, "groupSysFlag"),
            consumeTimeoutMinute=_as_int(obj.get("consumeTimeoutMinute"), 15,
                                         "consumeTimeoutMinute"),
            groupRetryPolicy=_as_dict(obj.get("groupRetryPolicy"), {"type": "CUSTOMIZED"},
                                      "groupRetryPolicy"),
            subscriptionDataSet=obj.get("subscriptionDataSet"),
            attributes={str(k): str(v) for k, v in
                        _as_dict(obj.get("attributes"), {}, "attributes").items()},
        )


def subscription_group_path(store_root: str) -> str:
    return os.path.join(store_root, "config", "subscriptionGroup.json")


class SubscriptionGroupManager(ConfigManager):
    def __init__(self, broker_config: BrokerConfig, store_root: str) -> None:
        self.broker_config = broker_config
        self.store_root = store_root
        self.table: dict[str, SubscriptionGroupConfig] = {
            g: SubscriptionGroupConfig(g) for g in DEFAULT_GROUPS
        }
        self.data_version = DataVersion()
        self.lmq = False  # enableLmq

    def find_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config, created on first use when auto-create allows it."""
        cfg = self.table.get(group)
        if cfg is not None:
            return cfg
        if self.lmq and is_lmq(group):  # LMQ groups exist without being stored
            return SubscriptionGroupConfig(group)
        if not (self.broker_config.autoCreateSubscriptionGroup
                or is_sys_consumer_group(group)):
            return None
        cfg = SubscriptionGroupConfig(group)
        self.table[group] = cfg
        log.info("auto create a subscription group, %s", cfg)
        self._changed()
        return cfg

    def contains(self, group: str) -> bool:
        return group in self.table

    def update_subscription_group_config(self, cfg: SubscriptionGroupConfig) -> None:
        if self.lmq and is_lmq(cfg.groupName):
            return
        old = self.table.get(cfg.groupName)
        self.table[cfg.groupName] = cfg
        if old is not None:
            log.info("update subscription group config, old: %s new: %s", old, cfg)
        else:
            log.info("create new subscription group, %s", cfg)
        self._changed()

    def disable_consume(self, group: str) -> None:
        cfg = self.table.get(group)
        if cfg is not None and cfg.consumeEnable:
            cfg.consumeEnable = False
            self.data_version.next_version()

    def delete_subscription_group_config(self, group: str) -> bool:
        old = self.table.pop(group, None)
        if old is None:
            log.warning("delete subscription group failed, subscription group: %s not exist",
                        group)
            return False
        log.info("delete subscription group OK, subscription group: %s", old)
        self._changed()
        return True

    def _changed(self) -> None:
        self.data_version.next_version()
        self.persist()

    def wrapper_json_obj(self) -> dict[str, Any]:
        """``SubscriptionGroupWrapper``: what the file and GET_ALL_SUBSCRIPTIONGROUP_CONFIG hold."""
        return {
            "dataVersion": self.data_version.to_json_obj(),
            "subscriptionGroupTable": {k: v.to_json_obj() for k, v in self.table.items()},
        }

    # ---- ConfigManager --------------------------------------------------
    def config_file_path(self) -> str:
        return subscription_group_path(self.store_root)

    def encode(self, pretty: bool = False) -> str:
        return dumps(self.wrapper_json_obj(), pretty)

    def decode(self, text: str) -> None:
        obj = parse_json(text)
        table_obj = obj.get("subscriptionGroupTable") or {}
        if not isinstance(table_obj, dict):
            raise ValueError("subscriptionGroupTable is not a JSON object")
        loaded = {k: SubscriptionGroupConfig.from_json_obj(v, k) for k, v in table_obj.items()}
        dv = DataVersion.from_json_obj(obj.get("dataVersion"))
        self.table.update(loaded)
        self.data_version.assign_new_one(dv)
