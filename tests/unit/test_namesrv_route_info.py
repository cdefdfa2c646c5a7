"""RouteInfoManager and KVConfigManager logic (no network)."""

import json

import pytest

from rmq.common.data_version import DataVersion
from rmq.common.properties import ConfigError
from rmq.common.route import TopicRouteData
from rmq.common.topic_config import TopicConfig, TopicConfigSerializeWrapper
from rmq.namesrv.config import NamesrvConfig
from rmq.namesrv.kv_config import KVConfigManager
from rmq.namesrv.route_info import RouteInfoManager


class FakeClock:
    def __init__(self):
        self.now = 1_000_000

    def __call__(self):
        return self.now


class Conn:
    """Stands in for a remoting Channel: identity and close() are all the tables use."""

    def __init__(self):
        self.closed = False

    def close(self):
        self.closed = True


def wrapper(topics, counter=1, ts=100, sys_flag=0):
    return TopicConfigSerializeWrapper(
        {t: TopicConfig(t, q, q, 6, topicSysFlag=sys_flag) for t, q in topics.items()},
        DataVersion(ts, counter))


@pytest.fixture
def rim():
    return RouteInfoManager(clock=FakeClock())


def register(rim, name, addr, bid, topics=None, cluster="C1", counter=1, conn=None, ha=None):
    return rim.register_broker(cluster, addr, name, bid, ha or addr.replace("10911", "10912"),
                               wrapper(topics or {}, counter), [], conn or Conn())


def test_master_registration_creates_route(rim):
    register(rim, "broker-a", "10.0.0.1:10911", 0, {"T": 4})
    route = rim.pickup_topic_route_data("T")
    assert [q.brokerName for q in route.queueDatas] == ["broker-a"]
    assert route.brokerDatas[0].brokerAddrs == {0: "10.0.0.1:10911"}
    assert rim.pickup_topic_route_data("nope") is None


def test_slave_gets_master_addresses_and_never_changes_topics(rim):
    register(rim, "broker-a", "10.0.0.1:10911", 0, {"T": 4})
    res = register(rim, "broker-a", "10.0.0.2:10911", 1, {"T": 8, "S": 1})
    assert (res.masterAddr, res.haServerAddr) == ("10.0.0.1:10911", "10.0.0.1:10912")
    assert rim.topic_queue_table["T"]["broker-a"].readQueueNums == 4
    assert "S" not in rim.topic_queue_table
    assert rim.broker_addr_table["broker-a"].brokerAddrs == {0: "10.0.0.1:10911",
                                                             1: "10.0.0.2:10911"}


def test_slave_without_live_master_gets_no_master(rim):
    res = register(rim, "broker-a", "10.0.0.2:10911", 1)
    assert res.masterAddr is None and res.haServerAddr is None


def test_same_address_with_new_id_replaces_old_entry(rim):
    register(rim, "broker-a", "10.0.0.1:10911", 0, {"T": 4})
    register(rim, "broker-a", "10.0.0.2:10911", 1)
    rim.unregister_broker("C1", "10.0.0.1:10911", "broker-a", 0)
    register(rim, "broker-a", "10.0.0.2:10911", 0, {"T": 4})  # slave promoted
    assert rim.broker_addr_table["broker-a"].brokerAddrs == {0: "10.0.0.2:10911"}


def test_topic_data_only_taken_when_data_version_changes(rim):
    register(rim, "broker-a", "10.0.0.1:10911", 0, {"T": 4}, counter=1)
    register(rim, "broker-a", "10.0.0.1:10911", 0, {"T": 8}, counter=1)  # same version
    assert rim.topic_queue_table["T"]["broker-a"].readQueueNums == 4
    register(rim, "broker-a", "10.0.0.1:10911", 0, {"T": 8, "U": 2}, counter=2)
    assert rim.topic_queue_table["T"]["broker-a"].readQueueNums == 8
    register(rim, "broker-a", "10.0.0.1:10911", 0, {"U": 2}, counter=3)  # upsert, no prune
    assert "T" in rim.topic_queue_table


def test_query_data_version_helpers(rim):
    register(rim, "broker-a", "10.0.0.1:10911", 0, {"T": 4}, counter=7)
    assert rim.query_broker_topic_config("10.0.0.1:10911") == DataVersion(100, 7)
    assert not rim.is_broker_topic_config_changed("10.0.0.1:10911", DataVersion(100, 7))
    assert rim.is_broker_topic_config_changed("10.0.0.1:10911", DataVersion(100, 8))
    assert rim.is_broker_topic_config_changed("10.9.9.9:1", DataVersion(100, 7))


def test_unregister_keeps_topics_while_a_slave_remains(rim):
    register(rim, "broker-a", "10.0.0.1:10911", 0, {"T": 4})
    register(rim, "broker-a", "10.0.0.2:10911", 1)
    rim.unregister_broker("C1", "10.0.0.1:10911", "broker-a", 0)
    route = rim.pickup_topic_route_data("T")
    assert route.brokerDatas[0].brokerAddrs == {1: "10.0.0.2:10911"}
    rim.unregister_broker("C1", "10.0.0.2:10911", "broker-a", 1)
    assert rim.topic_queue_table == {} and rim.broker_addr_table == {}
    assert rim.cluster_addr_table == {} and rim.broker_live_table == {}


def test_expiry_scan_removes_stale_brokers_and_closes_channel(rim):
    conn_a, conn_b = Conn(), Conn()
    register(rim, "broker-a", "10.0.0.1:10911", 0, {"T": 4, "A": 1}, conn=conn_a)
    rim.clock.now += 5_000
    register(rim, "broker-b", "10.0.0.3:10911", 0, {"T": 4}, cluster="C2", conn=conn_b)
    rim.clock.now += 120_000 - 4_000
    assert rim.scan_not_active_broker(120_000) == 1
    assert conn_a.closed and not conn_b.closed
    assert "A" not in rim.topic_queue_table
    assert list(rim.topic_queue_table["T"]) == ["broker-b"]
    assert list(rim.cluster_addr_table) == ["C2"]


def test_expiry_cleans_the_expired_address_even_on_a_shared_connection(rim):
    shared = Conn()
    register(rim, "broker-a", "10.0.0.1:10911", 0, {"A": 1}, conn=shared)
    rim.clock.now += 100_000
    register(rim, "broker-b", "10.0.0.3:10911", 0, {"B": 1}, conn=shared)
    rim.clock.now += 30_000
    assert rim.scan_not_active_broker(120_000) == 1
    assert list(rim.topic_queue_table) == ["B"] and list(rim.broker_addr_table) == ["broker-b"]


def test_channel_destroy_by_channel_or_address(rim):
    conn = Conn()
    register(rim, "broker-a", "10.0.0.1:10911", 0, {"T": 4}, conn=conn)
    register(rim, "broker-b", "10.0.0.3:10911", 0, {"T": 4})
    rim.on_channel_destroy("127.0.0.1:5555", conn)
    assert list(rim.broker_addr_table) == ["broker-b"]
    rim.on_channel_destroy("10.0.0.3:10911", None)
    assert rim.topic_queue_table == {} and rim.cluster_addr_table == {}
    rim.on_channel_destroy("1.2.3.4:1", Conn())  # unknown: nothing happens


def test_delete_topic_whole_and_per_cluster(rim):
    register(rim, "broker-a", "10.0.0.1:10911", 0, {"T": 4, "U": 1})
    register(rim, "broker-b", "10.0.0.3:10911", 0, {"T": 4}, cluster="C2")
    rim.delete_topic("T", "C1")
    assert list(rim.topic_queue_table["T"]) == ["broker-b"]
    rim.delete_topic("T", "C2")
    assert "T" not in rim.topic_queue_table
    rim.delete_topic("U")
    assert rim.topic_queue_table == {}


def test_write_perm_wipe_and_add(rim):
    register(rim, "broker-a", "10.0.0.1:10911", 0, {"T": 4, "U": 1})
    assert rim.wipe_write_perm_of_broker("broker-a") == 2
    assert rim.topic_queue_table["T"]["broker-a"].perm == 4
    assert rim.add_write_perm_of_broker("broker-a") == 2
    assert rim.topic_queue_table["U"]["broker-a"].perm == 6
    assert rim.wipe_write_perm_of_broker("nobody") == 0


def test_topic_lists(rim):
    rim.register_broker("C1", "10.0.0.1:10911", "broker-a", 0, "h", wrapper({"U": 1}, sys_flag=1),
                        [], Conn())
    rim.register_broker("C2", "10.0.0.3:10911", "broker-b", 0, "h",
                        wrapper({"S": 1}, sys_flag=2), [], Conn())
    rim.register_broker("C2", "10.0.0.4:10911", "broker-c", 0, "h",
                        wrapper({"B": 1}, sys_flag=3), [], Conn())
    assert sorted(rim.get_all_topic_list().topicList) == ["B", "S", "U"]
    assert sorted(rim.get_topics_by_cluster("C2").topicList) == ["B", "S"]
    assert rim.get_topics_by_cluster("nope").topicList == []
    assert sorted(rim.get_unit_topics().topicList) == ["B", "U"]
    assert sorted(rim.get_has_unit_sub_topic_list().topicList) == ["B", "S"]
    assert rim.get_has_unit_sub_ununit_topic_list().topicList == ["S"]
    system = rim.get_system_topic_list()
    assert sorted(system.topicList) == ["C1", "C2", "broker-a", "broker-b", "broker-c"]
    assert system.brokerAddr == "10.0.0.1:10911"


def test_filter_servers_in_route(rim):
    rim.register_broker("C1", "10.0.0.1:10911", "broker-a", 0, "h", wrapper({"T": 1}),
                        ["10.0.0.1:4000"], Conn())
    assert rim.pickup_topic_route_data("T").filterServerTable == {"10.0.0.1:10911": ["10.0.0.1:4000"]}
    rim.register_broker("C1", "10.0.0.1:10911", "broker-a", 0, "h", wrapper({"T": 1}), [], Conn())
    assert rim.pickup_topic_route_data("T").filterServerTable == {}


def test_encoded_route_cache_follows_changes(rim):
    register(rim, "broker-a", "10.0.0.1:10911", 0, {"T": 4})
    first = rim.encoded_topic_route("T", standard=False)
    assert TopicRouteData.decode(first).queueDatas[0].perm == 6
    assert rim.encoded_topic_route("T", standard=False) is first
    rim.wipe_write_perm_of_broker("broker-a")
    assert TopicRouteData.decode(rim.encoded_topic_route("T", False)).queueDatas[0].perm == 4
    assert b'"0":' in rim.encoded_topic_route("T", True)
    assert b'"orderTopicConf":"broker-a:4"' in rim.encoded_topic_route("T", True, "broker-a:4")
    assert rim.encoded_topic_route("missing", True) is None


def test_kv_config_persist_load_and_bak(tmp_path):
    path = str(tmp_path / "kv" / "kvConfig.json")
    kv = KVConfigManager(path)
    kv.load()
    assert kv.get_kv_list_by_namespace("ORDER_TOPIC_CONFIG") is None
    kv.put_kv_config("ORDER_TOPIC_CONFIG", "T", "broker-a:4")
    kv.put_kv_config("NS", "k", "v")
    kv.delete_kv_config("NS", "k")
    kv.delete_kv_config("none", "k")
    assert json.loads(open(path).read()) == {"configTable": {"NS": {}, "ORDER_TOPIC_CONFIG":
                                                             {"T": "broker-a:4"}}}
    assert kv.get_kv_list_by_namespace("ORDER_TOPIC_CONFIG") == b'{"table":{"T":"broker-a:4"}}'
    again = KVConfigManager(path)
    again.load()
    assert again.get_kv_config("ORDER_TOPIC_CONFIG", "T") == "broker-a:4"
    open(path, "w").write("{broken")
    fallback = KVConfigManager(path)
    fallback.load()  # the .bak copy has the previous table
    assert fallback.get_kv_config("ORDER_TOPIC_CONFIG", "T") == "broker-a:4"


def test_kv_config_corrupt_without_backup_refuses(tmp_path):
    path = tmp_path / "kvConfig.json"
    path.write_text('{"configTable":{"NS":{"k":1}}}')
    with pytest.raises(ConfigError, match="configTable"):
        KVConfigManager(str(path)).load()


def test_namesrv_config_black_list_and_validation():
    cfg = NamesrvConfig(configBlackList="a;b", scanNotActiveBrokerIntervalMillis=0)
    assert {"a", "b", "rocketmqHome", "kvConfigPath", "configStorePath"} <= cfg.black_list()
    assert cfg.validate() == ["scanNotActiveBrokerIntervalMillis must be > 0"]
