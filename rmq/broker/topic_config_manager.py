"""TopicConfigManager: the broker's topic table and ``config/topics.json``.

Mirrors RocketMQ's ``TopicConfigManager``: the system topics 4.9.8 creates in
memory at start (overridden by what topics.json holds), auto-creation of
topics on send through a default topic (``TBW102`` when
autoCreateTopicEnable), retry/DLQ/transaction topics created on demand, the
order flag taken from the name server's ORDER_TOPIC_CONFIG kv table, and a
DataVersion bumped on every change (the name server compares it).
"""

from __future__ import annotations

import bisect
import copy
import logging
import os
from collections.abc import Callable

from rmq.broker.config import BrokerConfig
from rmq.common import fastjson
from rmq.common import topics as T
from rmq.common.config_manager import ConfigManager, dumps, parse_json, pretty_dumps, pretty_into
from rmq.common.data_version import DataVersion
from rmq.common.logging import BROKER_LOGGER_NAME
from rmq.common.message import PERM_INHERIT, PERM_READ, PERM_WRITE, is_inherited
from rmq.common.topic_config import TopicConfig, TopicConfigSerializeWrapper
from rmq.store.multi_dispatch import is_lmq

log = logging.getLogger(BROKER_LOGGER_NAME)

SCHEDULE_QUEUE_NUMS = 18
BENCHMARK_QUEUE_NUMS = 1024
CLUSTER_TOPIC_QUEUE_NUMS = 16


def topics_json_path(store_root: str) -> str:
    return os.path.join(store_root, "config", "topics.json")


class TopicConfigManager(ConfigManager):
    """Topic table of one broker.

    ``on_new_topic`` is called (without arguments) after a topic was created
    by a send, a send-back or a transaction check: the controller answers it
    with a oneway registration so that routes appear at once, as 4.9.8 does.
    """

    __slots__ = ("table",)  # (the send lane reads it at its slot every read)

    def __init__(self, broker_config: BrokerConfig, store_root: str,
                 on_new_topic: Callable[[], None] | None = None) -> None:
        self.broker_config = broker_config
        self.store_root = store_root
        self.on_new_topic = on_new_topic
        self.table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        # topics.json's text per topic (key and pretty object) in the file's
        # order: after a change the manager names (``_changed``) only those
        # topics are encoded again; ``persist`` from anywhere else encodes
        # them all (the table may have been changed from outside or in place)
        self._names: list[str] = []
        self._texts: list[str] = []
        self._texts_valid = False
        self.system_topics: set[str] = set()
        self.lmq = False  # enableLmq: every %LMQ% topic exists, with one queue
        self._create_system_topics()

    # ---- start-up -------------------------------------------------------
    def _system(self, name: str, queues: int, perm: int = PERM_READ | PERM_WRITE) -> None:
        self.system_topics.add(name)
        self.table[name] = TopicConfig(name, queues, queues, perm)

    def _create_system_topics(self) -> None:
        bc = self.broker_config
        rw = PERM_READ | PERM_WRITE
        self._system(T.SELF_TEST_TOPIC, 1)
        if bc.autoCreateTopicEnable:
            self._system(T.AUTO_CREATE_TOPIC_KEY_TOPIC, bc.defaultTopicQueueNums,
                         rw | PERM_INHERIT)
        self._system(T.BENCHMARK_TOPIC, BENCHMARK_QUEUE_NUMS)
        self._system(bc.brokerClusterName, CLUSTER_TOPIC_QUEUE_NUMS,
                     rw | PERM_INHERIT if bc.clusterTopicEnable else PERM_INHERIT)
        self._system(bc.brokerName, 1, rw | PERM_INHERIT if bc.brokerTopicEnable else PERM_INHERIT)
        self._system(T.OFFSET_MOVED_EVENT, 1)
        self._system(T.SCHEDULE_TOPIC, SCHEDULE_QUEUE_NUMS)
        if bc.traceTopicEnable:
            self._system(bc.msgTraceTopicName, 1)
        self._system(bc.brokerClusterName + T.REPLY_TOPIC_POSTFIX, 1)

    # ---- queries --------------------------------------------------------
    def select_topic_config(self, topic: str) -> TopicConfig | None:
        tc = self.table.get(topic)
        if tc is None and self.lmq and is_lmq(topic):
            return TopicConfig(topic, 1, 1, PERM_READ | PERM_WRITE)
        return tc

    def is_order_topic(self, topic: str) -> bool:
        tc = self.table.get(topic)
        return tc is not None and tc.order

    def build_topic_config_serialize_wrapper(self) -> TopicConfigSerializeWrapper:
        """A snapshot for registration (copies: the table may change meanwhile)."""
        table = {k: copy.copy(v) for k, v in self.table.items()}
        dv = DataVersion(self.data_version.timestamp, self.data_version.counter)
        return TopicConfigSerializeWrapper(table, dv)

    # ---- changes --------------------------------------------------------
    def _changed(self, *replaced: str) -> None:
        """Next data version, then persist (synchronously, as 4.9.8 does).
        ``replaced`` names the topics whose TopicConfig objects were added,
        replaced or removed; without names a config may have been changed in
        place and every topic's text is encoded again."""
        self.data_version.next_version()
        if not replaced or not self._texts_valid:
            self.persist()
            return
        for name in replaced:
            self._update_text(name)
        ConfigManager.persist(self)

    def persist(self) -> None:
        self._texts_valid = False
        super().persist()

    def create_topic_in_send_message_method(self, topic: str, default_topic: str,
                                            remote_address: str, client_default_queue_nums: int,
                                            topic_sys_flag: int) -> TopicConfig | None:
        """Auto-create ``topic`` from ``default_topic`` (a send to an unknown topic).

        The default topic must exist and carry the inherit bit; TBW102 loses its
        permission to be inherited when autoCreateTopicEnable is false.
        """
        tc = self.table.get(topic)
        if tc is not None:
            return tc
        default = self.table.get(default_topic)
        if default is None:
            log.warning("Create new topic failed, because the default topic[%s] not exist. "
                        "producer:[%s]", default_topic, remote_address)
            return None
        if default_topic == T.AUTO_CREATE_TOPIC_KEY_TOPIC and \
                not self.broker_config.autoCreateTopicEnable:
            default.perm = PERM_READ | PERM_WRITE
        if not is_inherited(default.perm):
            log.warning("Create new topic failed, because the default topic[%s] has no perm "
                        "[%s] producer:[%s]", default_topic, default.perm, remote_address)
            return None
        queues = max(0, min(client_default_queue_nums, default.writeQueueNums))
        tc = TopicConfig(topic, queues, queues, default.perm & ~PERM_INHERIT,
                         default.topicFilterType, topic_sys_flag)
        log.info("Create new topic by default topic:[%s] config:[%s] producer:[%s]",
                 default_topic, tc, remote_address)
        self.table[topic] = tc
        self._changed()  # the default topic's perm may have been changed in place
        self._notify_new_topic()
        return tc

    def create_topic_in_send_message_back_method(self, topic: str, client_default_queue_nums: int,
                                                 perm: int, topic_sys_flag: int) -> TopicConfig:
        """Retry/DLQ topics created when a consumer sends a message back."""
        tc = self.table.get(topic)
        if tc is not None:
            return tc
        tc = TopicConfig(topic, client_default_queue_nums, client_default_queue_nums, perm,
                         topicSysFlag=topic_sys_flag)
        log.info("create new topic %s", tc)
        self.table[topic] = tc
        self._changed(topic)
        self._notify_new_topic()
        return tc

    def create_topic_of_tran_check_max_time(self, client_default_queue_nums: int,
                                            perm: int) -> TopicConfig:
        return self.create_topic_in_send_message_back_method(
            T.TRANS_CHECK_MAX_TIME_TOPIC, client_default_queue_nums, perm, 0)

    def _notify_new_topic(self) -> None:
        if self.on_new_topic is not None:
            self.on_new_topic()

    def update_topic_config(self, tc: TopicConfig) -> None:
        if self.lmq and is_lmq(tc.topicName):
            return
        old = self.table.get(tc.topicName)
        self.table[tc.topicName] = tc
        if old is not None:
            log.info("update topic config, old:[%s] new:[%s]", old, tc)
        else:
            log.info("create new topic [%s]", tc)
        self._changed(tc.topicName)

    def update_order_topic_config(self, kv_table: dict[str, str] | None) -> None:
        """Mark the topics of the name server's ORDER_TOPIC_CONFIG as order topics
        and clear the flag of the others (only when the name server has a table)."""
        if not kv_table:
            return
        changed = False
        for topic in kv_table:
            tc = self.table.get(topic)
            if tc is not None and not tc.order:
                tc.order = True
                changed = True
                log.info("update order topic config, topic=%s, order=true", topic)
        for name, tc in self.table.items():
            if tc.order and name not in kv_table:
                tc.order = False
                changed = True
                log.info("update order topic config, topic=%s, order=false", name)
        if changed:
            self._changed()

    def delete_topic_config(self, topic: str) -> bool:
        old = self.table.pop(topic, None)
        if old is None:
            log.warning("delete topic config failed, topic: %s not exists", topic)
            return False
        log.info("delete topic config OK, topic: %s", old)
        self._changed(topic)
        return True

    def bump_data_version(self) -> None:
        """A broker-wide change that the name server must see (e.g. brokerPermission)."""
        self.data_version.next_version()

    # ---- ConfigManager --------------------------------------------------
    def config_file_path(self) -> str:
        return topics_json_path(self.store_root)

    def encode(self, pretty: bool = False) -> str:
        if not pretty:
            return dumps(TopicConfigSerializeWrapper(self.table, self.data_version).to_json_obj(),
                         False)
        return self._pretty()

    def _pretty(self) -> str:
        """``pretty_dumps`` of the wrapper, each topic's text encoded once and
        kept in the file's order: after a change the manager names, the cost
        grows with the table by a join only."""
        if not self._texts_valid:
            self._check_texts()
        elif len(self._names) != len(self.table):  # changed from outside meanwhile
            self._check_texts()
        texts = self._texts
        body = "{" + ",".join(texts) + "\n\t}" if texts else "{}"
        return ("{\n\t\"dataVersion\":" + pretty_dumps(self.data_version.to_json_obj(), 1)
                + ",\n\t\"topicConfigTable\":" + body + "\n}")

    def _check_texts(self) -> None:
        """Every topic's text encoded again."""
        self._names = sorted(self.table)  # topic names are str: fastjson's member order
        self._texts = [self._text(n) for n in self._names]
        self._texts_valid = True

    def _text(self, name: str) -> str:
        out = ["\n\t\t", fastjson.dumps(name).decode(), ":"]
        pretty_into(self.table[name].to_json_obj(), 2, out)
        return "".join(out)

    def _update_text(self, name: str) -> None:
        """Bring one topic's text in line with the table (added, replaced or removed)."""
        names = self._names
        i = bisect.bisect_left(names, name)
        present = i < len(names) and names[i] == name
        if name not in self.table:
            if present:
                del names[i]
                del self._texts[i]
        elif present:
            self._texts[i] = self._text(name)
        else:
            names.insert(i, name)
            self._texts.insert(i, self._text(name))

    def decode(self, text: str) -> None:
        wrapper = TopicConfigSerializeWrapper.from_json_obj(parse_json(text))
        self.table.update(wrapper.topicConfigTable)
        self.data_version.assign_new_one(wrapper.dataVersion)
