"""Broker config managers: .bak fallback, atomic writes, file shapes, table rules."""

from __future__ import annotations

import pytest

from rmq.broker.config import BrokerConfig
from rmq.broker.consumer_filter_manager import ConsumerFilterManager
from rmq.broker.consumer_offset_manager import ConsumerOffsetManager
from rmq.broker.subscription_group_manager import SubscriptionGroupManager
from rmq.broker.topic_config_manager import TopicConfigManager
from rmq.common import fastjson
from rmq.common.config_manager import ConfigLoadError, pretty_dumps
from rmq.common.topic_config import TopicConfig


def broker_config(**kw) -> BrokerConfig:
    cfg = BrokerConfig(brokerName="broker-a", brokerIP1="127.0.0.1", brokerIP2="127.0.0.1")
    for k, v in kw.items():
        setattr(cfg, k, v)
    return cfg


def test_pretty_format_matches_fastjson_layout():
    text = pretty_dumps({"offsetTable": {"T@g": {1: 20, 0: 10}}, "a": [], "b": {}})
    assert text == '{\n\t"a":[],\n\t"b":{},\n\t"offsetTable":{\n\t\t"T@g":{0:10,1:20\n\t\t}\n\t}\n}'


def test_system_topics_created_at_start(tmp_path):
    tcm = TopicConfigManager(broker_config(), str(tmp_path))
    t = tcm.table
    assert (t["TBW102"].readQueueNums, t["TBW102"].perm) == (8, 7)
    assert t["SCHEDULE_TOPIC_XXXX"].writeQueueNums == 18
    assert t["BenchmarkTest"].readQueueNums == 1024
    assert (t["DefaultCluster"].readQueueNums, t["DefaultCluster"].perm) == (16, 7)
    assert (t["broker-a"].readQueueNums, t["broker-a"].perm) == (1, 7)
    assert "DefaultCluster_REPLY_TOPIC" in t and "OFFSET_MOVED_EVENT" in t
    assert "SELF_TEST_TOPIC" in t and "RMQ_SYS_TRACE_TOPIC" not in t
    assert tcm.system_topics == set(t)


def test_system_topic_switches(tmp_path):
    tcm = TopicConfigManager(broker_config(autoCreateTopicEnable=False, clusterTopicEnable=False,
                                           brokerTopicEnable=False, traceTopicEnable=True),
                             str(tmp_path))
    assert "TBW102" not in tcm.table
    assert tcm.table["DefaultCluster"].perm == 1
    assert tcm.table["broker-a"].perm == 1
    assert tcm.table["RMQ_SYS_TRACE_TOPIC"].readQueueNums == 1


def test_auto_create_through_tbw102(tmp_path):
    created = []
    tcm = TopicConfigManager(broker_config(), str(tmp_path), on_new_topic=lambda: created.append(1))
    before = tcm.data_version.counter
    tc = tcm.create_topic_in_send_message_method("NewTopic", "TBW102", "1.2.3.4:5", 4, 0)
    assert (tc.readQueueNums, tc.writeQueueNums, tc.perm) == (4, 4, 6)
    assert tcm.data_version.counter == before + 1 and created == [1]
    # more queues than the default topic has are capped
    tc2 = tcm.create_topic_in_send_message_method("Big", "TBW102", "x", 64, 0)
    assert tc2.writeQueueNums == 8
    assert (tmp_path / "config" / "topics.json").exists()


def test_auto_create_refused_without_default_topic_or_inherit(tmp_path):
    tcm = TopicConfigManager(broker_config(autoCreateTopicEnable=False), str(tmp_path))
    assert tcm.create_topic_in_send_message_method("X", "TBW102", "h", 4, 0) is None
    tcm.update_topic_config(TopicConfig("TBW102", 8, 8, 7))
    # TBW102 loses its inherit bit when auto-create is off
    assert tcm.create_topic_in_send_message_method("X", "TBW102", "h", 4, 0) is None
    assert tcm.table["TBW102"].perm == 6


def test_topics_json_round_trip_and_merge_over_defaults(tmp_path):
    tcm = TopicConfigManager(broker_config(), str(tmp_path))
    tcm.update_topic_config(TopicConfig("TopicTest", 4, 4, 6))
    text = (tmp_path / "config" / "topics.json").read_text()
    assert text.startswith('{\n\t"dataVersion":{\n\t\t"counter":1,')
    assert '\t\t"TopicTest":{\n\t\t\t"attributes":{},\n\t\t\t"order":false,\n\t\t\t"perm":6,' in text
    again = TopicConfigManager(broker_config(), str(tmp_path))
    again.load()
    assert again.table["TopicTest"].readQueueNums == 4
    assert again.data_version == tcm.data_version
    assert "SELF_TEST_TOPIC" in again.table


def test_order_topic_config_from_namesrv_kv(tmp_path):
    tcm = TopicConfigManager(broker_config(), str(tmp_path))
    tcm.update_topic_config(TopicConfig("Ordered", 4, 4, 6))
    tcm.update_topic_config(TopicConfig("Plain", 4, 4, 6, order=True))
    v = tcm.data_version.counter
    tcm.update_order_topic_config({"Ordered": "broker-a:4"})
    assert tcm.is_order_topic("Ordered") and not tcm.is_order_topic("Plain")
    assert tcm.data_version.counter == v + 1
    tcm.update_order_topic_config(None)
    assert tcm.is_order_topic("Ordered")


def test_delete_topic_bumps_version(tmp_path):
    tcm = TopicConfigManager(broker_config(), str(tmp_path))
    tcm.update_topic_config(TopicConfig("Gone", 1, 1, 6))
    v = tcm.data_version.counter
    assert tcm.delete_topic_config("Gone") and not tcm.delete_topic_config("Gone")
    assert tcm.data_version.counter == v + 1


def test_bak_fallback_when_file_corrupt(tmp_path):
    com = ConsumerOffsetManager(str(tmp_path))
    com.commit_offset("h", "g", "T", 0, 5)
    com.persist()
    com.commit_offset("h", "g", "T", 0, 9)
    com.persist()  # previous content (offset 5) is now the .bak
    path = tmp_path / "config" / "consumerOffset.json"
    assert fastjson.loads((tmp_path / "config" / "consumerOffset.json.bak").read_text())
    path.write_text("{ not json")
    again = ConsumerOffsetManager(str(tmp_path))
    again.load()
    assert again.query_offset("g", "T", 0) == 5


def test_both_corrupt_refuses(tmp_path):
    cfg_dir = tmp_path / "config"
    cfg_dir.mkdir()
    (cfg_dir / "subscriptionGroup.json").write_text("garbage")
    (cfg_dir / "subscriptionGroup.json.bak").write_text("{also garbage")
    with pytest.raises(ConfigLoadError) as info:
        SubscriptionGroupManager(broker_config(), str(tmp_path)).load()
    assert "subscriptionGroup.json" in str(info.value) and ".bak" in str(info.value)


def test_missing_files_load_defaults(tmp_path):
    sgm = SubscriptionGroupManager(broker_config(), str(tmp_path))
    sgm.load()
    assert "TOOLS_CONSUMER" in sgm.table


def test_no_tmp_file_left_after_persist(tmp_path):
    com = ConsumerOffsetManager(str(tmp_path))
    com.persist()
    assert sorted(p.name for p in (tmp_path / "config").iterdir()) == ["consumerOffset.json"]


def test_consumer_offsets(tmp_path):
    com = ConsumerOffsetManager(str(tmp_path))
    assert com.query_offset("g", "T", 0) == -1
    com.commit_offset("h", "g", "T", 0, 10)
    com.commit_offset("h", "g", "T", 1, 20)
    com.commit_offset("h", "g2", "U", 0, 1)
    assert com.query_offset_all("g", "T") == {0: 10, 1: 20}
    assert com.which_topic_by_consumer("g") == {"T"}
    assert com.which_group_by_topic("T") == {"g"}
    com.persist()
    text = (tmp_path / "config" / "consumerOffset.json").read_text()
    assert '"T@g":{0:10,1:20\n\t\t}' in text
    again = ConsumerOffsetManager(str(tmp_path))
    again.load()
    assert again.query_offset("g", "T", 1) == 20
    again.remove_offset("g")
    assert again.query_offset("g", "T", 1) == -1 and again.query_offset("g2", "U", 0) == 1


def test_subscription_group_auto_create(tmp_path):
    sgm = SubscriptionGroupManager(broker_config(), str(tmp_path))
    cfg = sgm.find_subscription_group_config("cg")
    assert cfg is not None and cfg.retryMaxTimes == 16
    assert (tmp_path / "config" / "subscriptionGroup.json").exists()
    strict = SubscriptionGroupManager(broker_config(autoCreateSubscriptionGroup=False),
                                      str(tmp_path / "s"))
    assert strict.find_subscription_group_config("cg") is None
    assert strict.find_subscription_group_config("CID_RMQ_SYS_X") is not None


def test_subscription_group_file_shape_and_reload(tmp_path):
    sgm = SubscriptionGroupManager(broker_config(), str(tmp_path))
    sgm.find_subscription_group_config("cg")
    obj = fastjson.loads((tmp_path / "config" / "subscriptionGroup.json").read_text())
    assert obj["subscriptionGroupTable"]["cg"] == {
        "attributes": {}, "brokerId": 0, "consumeBroadcastEnable": True,
        "consumeEnable": True, "consumeFromMinEnable": True, "consumeMessageOrderly": False,
        "consumeTimeoutMinute": 15, "groupName": "cg",
        "groupRetryPolicy": {"type": "CUSTOMIZED"}, "groupSysFlag": 0,
        "notifyConsumerIdsChangedEnable": True,
        "retryMaxTimes": 16, "retryQueueNums": 1, "whichBrokerWhenConsumeSlowly": 1}
    again = SubscriptionGroupManager(broker_config(), str(tmp_path))
    again.load()
    assert "cg" in again.table and again.data_version == sgm.data_version
    assert again.delete_subscription_group_config("cg")


def test_consumer_filter_manager(tmp_path):
    cfm = ConsumerFilterManager(broker_config(), str(tmp_path))
    assert not cfm.register("T", "g", "a > 1", "TAG", 1)
    assert cfm.register("T", "g", "a > 1", "SQL92", 1)
    assert not cfm.register("T", "g", "a > 1", "SQL92", 1)
    cfm.persist()
    obj = fastjson.loads((tmp_path / "config" / "consumerFilter.json").read_text())
    data = obj["filterDataByTopic"]["T"]["groupFilterData"]["g"]
    assert data["expression"] == "a > 1" and data["dead"] is False
    again = ConsumerFilterManager(broker_config(), str(tmp_path))
    again.load()
    # loaded entries are dead (30 s before the load, or at birth if born later)
    loaded = again.get("T", "g")
    assert loaded.dead and loaded.deadTime == loaded.bornTime
    cfm.unregister("g")
    assert cfm.get("T", "g").dead
    cfm.clean_dead(now_ms=cfm.get("T", "g").deadTime + 24 * 3600 * 1000 + 1)
    assert cfm.get("T", "g") is None


def test_topics_json_encoded_per_topic_is_the_whole_table_encoded(tmp_path):
    """topics.json after any sequence of changes -- created, replaced,
    deleted, changed in place (order flags, an auto-created topic), reloaded --
    is byte for byte the whole wrapper encoded at once; the .bak is the
    previous file."""
    import random

    from rmq.common.topic_config import TopicConfigSerializeWrapper

    rnd = random.Random(3)
    tcm = TopicConfigManager(BrokerConfig(), str(tmp_path))
    path = tmp_path / "config" / "topics.json"

    def whole() -> str:
        return pretty_dumps(TopicConfigSerializeWrapper(tcm.table, tcm.data_version).to_json_obj())

    previous = None
    for i in range(300):
        roll = rnd.random()
        name = f"T{rnd.randrange(60)}é" if rnd.random() < 0.1 else f"T{rnd.randrange(60)}"
        if roll < 0.6:
            tcm.update_topic_config(TopicConfig(name, rnd.randrange(1, 9), rnd.randrange(1, 9),
                                                rnd.choice([2, 4, 6]), order=rnd.random() < 0.2))
        elif roll < 0.75:
            tcm.delete_topic_config(name)
        elif roll < 0.85:
            tcm.update_order_topic_config({n: "conf" for n in list(tcm.table)[::7]})
        elif roll < 0.95:
            tcm.create_topic_in_send_message_method(f"Auto{i}", "TBW102", "peer", 4, 0)
        else:
            tcm = TopicConfigManager(BrokerConfig(), str(tmp_path))
            tcm.load()
            continue
        text = path.read_text()
        assert text == whole(), i
        if previous is not None and previous != text:
            assert (tmp_path / "config" / "topics.json.bak").read_text() == previous
        previous = text
