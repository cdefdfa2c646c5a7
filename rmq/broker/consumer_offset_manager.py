"""ConsumerOffsetManager: committed consumer offsets and ``config/consumerOffset.json``.

Mirrors RocketMQ's ``ConsumerOffsetManager``.  Key ``topic@group``, value
queueId -> next logical offset to consume.  Commits only touch memory; the
controller persists every flushConsumerOffsetInterval and at shutdown.

File shape (fastjson pretty with one tab per level, integer keys bare)::

    {
        "offsetTable":{
            "TopicTest@cg":{0:10,1:20
            }
        }
    }
"""

from __future__ import annotations

import logging
import os
from typing import Any

from rmq.common.config_manager import ConfigManager, dumps, parse_json
from rmq.common.logging import BROKER_LOGGER_NAME
from rmq.store.multi_dispatch import is_lmq

log = logging.getLogger(BROKER_LOGGER_NAME)

TOPIC_GROUP_SEPARATOR = "@"


def consumer_offset_path(store_root: str) -> str:
    return os.path.join(store_root, "config", "consumerOffset.json")


def offset_table_from_json(obj: Any) -> dict[str, dict[int, int]]:
    """``{"topic@group": {queueId: offset}}`` with keys quoted or bare."""
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise ValueError("offsetTable is not a JSON object")
    table: dict[str, dict[int, int]] = {}
    for key, queues in obj.items():
        if not isinstance(queues, dict):
            raise ValueError(f"offsets of {key} are not a JSON object")
        table[key] = {int(q): int(o) for q, o in queues.items()}
    return table


class ConsumerOffsetManager(ConfigManager):
    """Committed offsets by ``topic@group`` and queue.  With ``lmq``
    (enableLmq, 4.9.8's LmqConsumerOffsetManager) a %LMQ% group keeps one
    offset per topic whatever the queue, and the whole table lives in
    config/lmqConsumerOffset.json."""

    def __init__(self, store_root: str, lmq: bool = False) -> None:
        self.store_root = store_root
        self.offset_table: dict[str, dict[int, int]] = {}
        self.lmq = lmq
        self.lmq_offset_table: dict[str, int] = {}
        # 5.3.3's pullOffsetTable: the next offset each pull handed out, in
        # memory only (5.3.3 does not persist it); GET_CONSUME_STATS answers it
        # as OffsetWrapper.pullOffset, mqadmin's #Inflight is it minus the
        # committed offset
        self.pull_offset_table: dict[str, dict[int, int]] = {}

    @staticmethod
    def key(topic: str, group: str) -> str:
        return topic + TOPIC_GROUP_SEPARATOR + group

    def commit_offset(self, client_host: str, group: str, topic: str, queue_id: int,
                      offset: int) -> None:
        if self.lmq and is_lmq(group):
            self.lmq_offset_table[self.key(topic, group)] = offset
            return
        queues = self.offset_table.setdefault(self.key(topic, group), {})
        prev = queues.get(queue_id)
        queues[queue_id] = offset
        if prev is not None and offset < prev:
            log.warning("[NOTIFYME]update consumer offset less than store. clientHost=%s, "
                        "key=%s@%s, queueId=%d, requestOffset=%d, storeOffset=%d",
                        client_host, topic, group, queue_id, offset, prev)

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, -1 when the group never committed this queue."""
        if self.lmq and is_lmq(group):
            return self.lmq_offset_table.get(self.key(topic, group), -1)
        queues = self.offset_table.get(self.key(topic, group))
        if queues is None:
            return -1
        return queues.get(queue_id, -1)

    def commit_pull_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.pull_offset_table.setdefault(self.key(topic, group), {})[queue_id] = offset

    def query_pull_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The offset after the last pull of the queue, else the committed one."""
        queues = self.pull_offset_table.get(self.key(topic, group))
        offset = queues.get(queue_id) if queues is not None else None
        return self.query_offset(group, topic, queue_id) if offset is None else offset

    def query_offset_all(self, group: str, topic: str) -> dict[int, int]:
        if self.lmq and is_lmq(group):
            offset = self.lmq_offset_table.get(self.key(topic, group))
            return {} if offset is None else {0: offset}
        return dict(self.offset_table.get(self.key(topic, group), {}))

    def _topic_group_pairs(self) -> list[tuple[str, str]]:
        """(topic, group) of every offset-table key ``topic@group``."""
        pairs = []
        for key in self.offset_table:
            topic, _, group = key.rpartition(TOPIC_GROUP_SEPARATOR)
            pairs.append((topic, group))
        return pairs

    def which_topic_by_consumer(self, group: str) -> set[str]:
        return {t for t, g in self._topic_group_pairs() if g == group}

    def which_group_by_topic(self, topic: str) -> set[str]:
        return {g for t, g in self._topic_group_pairs() if t == topic}

    def remove_offset(self, group: str) -> None:
        """Forget every offset of ``group`` (DELETE_SUBSCRIPTIONGROUP with removeOffset)."""
        for key in [k for k in self.offset_table
                    if k.rpartition(TOPIC_GROUP_SEPARATOR)[2] == group]:
            del self.offset_table[key]
            log.warning("clean group offset %s", key)
        for key in [k for k in self.pull_offset_table
                    if k.rpartition(TOPIC_GROUP_SEPARATOR)[2] == group]:
            del self.pull_offset_table[key]

    def clean_offset_by_topic(self, topic: str) -> None:
        for key in [k for k in self.offset_table
                    if k.rpartition(TOPIC_GROUP_SEPARATOR)[0] == topic]:
            del self.offset_table[key]
            log.warning("clean topic offset %s", key)
        for key in [k for k in self.pull_offset_table
                    if k.rpartition(TOPIC_GROUP_SEPARATOR)[0] == topic]:
            del self.pull_offset_table[key]

    def clone_offset(self, src_group: str, dest_group: str, topic: str) -> None:
        queues = self.offset_table.get(self.key(topic, src_group))
        if queues is not None:
            self.offset_table[self.key(topic, dest_group)] = dict(queues)

    def wrapper_json_obj(self) -> dict[str, Any]:
        if self.lmq:
            return {"lmqOffsetTable": self.lmq_offset_table, "offsetTable": self.offset_table}
        return {"offsetTable": self.offset_table}

    # ---- ConfigManager --------------------------------------------------
    def config_file_path(self) -> str:
        if self.lmq:
            return os.path.join(self.store_root, "config", "lmqConsumerOffset.json")
        return consumer_offset_path(self.store_root)

    def encode(self, pretty: bool = False) -> str:
        return dumps(self.wrapper_json_obj(), pretty)

    def decode(self, text: str) -> None:
        obj = parse_json(text)
        self.offset_table = offset_table_from_json(obj.get("offsetTable"))
        if self.lmq:
            lmq = obj.get("lmqOffsetTable") or {}
            if not isinstance(lmq, dict):
                raise ValueError("lmqOffsetTable is not a JSON object")
            self.lmq_offset_table = {str(k): int(v) for k, v in lmq.items()}
