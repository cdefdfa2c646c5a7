"""rmq-namesrv as a real process on loopback, driven with raw remoting requests
the way 4.9.8 brokers, clients and mqadmin send them."""

from __future__ import annotations

import asyncio
import json
import socket
import time
import zlib

import pytest

from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.data_version import DataVersion
from rmq.common.route import ClusterInfo, KVTable, TopicList, TopicRouteData
from rmq.common.topic_config import RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper
from rmq.remoting import RemotingClient, RemotingCommand
from rmq.testing.procs import free_port, run_cli

MODULE = "rmq.namesrv.startup"
pytestmark = pytest.mark.timeout(60)


def write_conf(tmp_path, port, name="namesrv.conf", **extra):
    settings = {
        "listenPort": port,
        "kvConfigPath": tmp_path / "kv" / "kvConfig.json",
        "logDir": tmp_path / "logs",
        "bindAddress": "127.0.0.1",
        **extra,
    }
    path = tmp_path / name
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return str(path)


@pytest.fixture
def start_namesrv(procs, tmp_path):
    def start(name="namesrv.conf", **extra):
        port = free_port()
        conf = write_conf(tmp_path, port, name, **extra)
        proc = procs(MODULE, ["-c", conf], name=name).start(wait_for_port=port)
        return f"127.0.0.1:{port}", proc
    return start


@pytest.fixture
async def client():
    c = RemotingClient()
    yield c
    await c.close()


def topics_wrapper(topics: dict[str, int], counter=1, perm=6, sys_flag=0):
    return TopicConfigSerializeWrapper(
        {t: TopicConfig(t, q, q, perm, topicSysFlag=sys_flag) for t, q in topics.items()},
        DataVersion(1700000000000, counter))


def register_request(cluster, name, addr, broker_id, topics=None, counter=1, compressed=False,
                     crc=True, body=None, version=None):
    if body is None:
        body = RegisterBrokerBody(topics_wrapper(topics or {}, counter)).encode(compressed)
    header = {"brokerName": name, "brokerAddr": addr, "clusterName": cluster,
              "haServerAddr": addr.rsplit(":", 1)[0] + ":10912", "brokerId": str(broker_id),
              "compressed": "true" if compressed else "false",
              "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF) if crc else "0"}
    req = RemotingCommand.create_request(RequestCode.REGISTER_BROKER, header, body)
    if version is not None:
        req.version = version
    return req


async def call(client, addr, code, header=None, body=None, version=None):
    req = RemotingCommand.create_request(code, header, body)
    if version is not None:
        req.version = version
    return await client.invoke(addr, req, 5000)


async def route(client, addr, topic, version=None, **extra):
    return await call(client, addr, RequestCode.GET_ROUTEINFO_BY_TOPIC,
                      {"topic": topic, **extra}, version=version)


async def register_two_clusters(client, addr):
    """c1: broker-a (master+slave), broker-b (master); c2: broker-c (master+slave)."""
    out = []
    for cluster, name, host, bid, topics in [
        ("c1", "broker-a", "10.0.0.1:10911", 0, {"TopicA": 4, "Shared": 2}),
        ("c1", "broker-a", "10.0.0.2:10911", 1, {"TopicA": 4, "Shared": 2}),
        ("c1", "broker-b", "10.0.0.3:10911", 0, {"Shared": 8}),
        ("c2", "broker-c", "10.0.1.1:10911", 0, {"TopicC": 1, "Shared": 1}),
        ("c2", "broker-c", "10.0.1.2:10911", 1, {"TopicC": 1}),
    ]:
        resp = await client.invoke(addr, register_request(cluster, name, host, bid, topics), 5000)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        out.append(resp)
    return out


async def test_two_clusters_masters_and_slaves(start_namesrv, client):
    addr, _ = start_namesrv()
    responses = await register_two_clusters(client, addr)
    # slaves learn their master's address and HA address
    assert responses[1].ext_fields["masterAddr"] == "10.0.0.1:10911"
    assert responses[1].ext_fields["haServerAddr"] == "10.0.0.1:10912"
    assert responses[4].ext_fields["masterAddr"] == "10.0.1.1:10911"
    assert "masterAddr" not in (responses[0].ext_fields or {})
    assert responses[0].body is None  # no ORDER_TOPIC_CONFIG namespace yet

    resp = await route(client, addr, "Shared")
    assert resp.code == ResponseCode.SUCCESS
    data = TopicRouteData.decode(resp.body)
    assert sorted((q.brokerName, q.readQueueNums) for q in data.queueDatas) == [
        ("broker-a", 2), ("broker-b", 8), ("broker-c", 1)]
    addrs = {b.brokerName: b.brokerAddrs for b in data.brokerDatas}
    assert addrs["broker-a"] == {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}
    assert data.filterServerTable == {}

    info = await call(client, addr, RequestCode.GET_BROKER_CLUSTER_INFO)
    assert b'"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}' in info.body
    ci = ClusterInfo.decode(info.body)
    assert ci.clusterAddrTable == {"c1": {"broker-a", "broker-b"}, "c2": {"broker-c"}}

    topics = await call(client, addr, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    assert sorted(TopicList.decode(topics.body).topicList) == ["Shared", "TopicA", "TopicC"]
    by_cluster = await call(client, addr, RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "c2"})
    assert sorted(TopicList.decode(by_cluster.body).topicList) == ["Shared", "TopicC"]
    unknown = await call(client, addr, RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "zz"})
    assert (unknown.code, unknown.body) == (ResponseCode.SUCCESS, b'{"topicList":[]}')
    system = TopicList.decode((await call(client, addr,
                                          RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)).body)
    assert set(system.topicList) == {"c1", "c2", "broker-a", "broker-b", "broker-c"}
    assert system.brokerAddr


async def test_route_json_dialect_by_version(start_namesrv, client):
    addr, _ = start_namesrv()
    await register_two_clusters(client, addr)
    legacy = await route(client, addr, "TopicA", version=373)
    assert b'"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}' in legacy.body
    standard = await route(client, addr, "TopicA", version=409)
    assert standard.body == (
        b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},'
        b'"brokerName":"broker-a","cluster":"c1"}],"filterServerTable":{},"queueDatas":'
        b'[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,'
        b'"writeQueueNums":4}]}')
    json.loads(standard.body)  # valid JSON
    asked = await route(client, addr, "TopicA", version=333, acceptStandardJsonOnly="true")
    assert asked.body == standard.body


async def test_unknown_topic_and_unknown_code(start_namesrv, client):
    addr, _ = start_namesrv()
    resp = await route(client, addr, "NoSuchTopic")
    assert resp.code == ResponseCode.TOPIC_NOT_EXIST
    assert resp.remark.startswith("No topic route info in name server for the topic: NoSuchTopic")
    resp = await call(client, addr, 9999)
    assert (resp.code, resp.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                        " request type 9999 not supported")
    resp = await call(client, addr, RequestCode.GET_ROUTEINFO_BY_TOPIC, {})
    assert resp.code == ResponseCode.SYSTEM_ERROR and "topic" in resp.remark


async def test_compressed_and_legacy_bodies(start_namesrv, client):
    addr, _ = start_namesrv()
    resp = await client.invoke(addr, register_request(
        "c1", "broker-z", "10.0.0.9:10911", 0, {"Zipped": 3}, compressed=True), 5000)
    assert resp.code == ResponseCode.SUCCESS
    assert TopicRouteData.decode((await route(client, addr, "Zipped")).body).queueDatas[0].readQueueNums == 3
    bare = topics_wrapper({"Old": 2}).encode()  # V3_0_10 broker: bare wrapper, no crc
    resp = await client.invoke(addr, register_request(
        "c1", "broker-old", "10.0.0.8:10911", 0, body=bare, crc=False, version=36), 5000)
    assert resp.code == ResponseCode.SUCCESS
    assert (await route(client, addr, "Old")).code == ResponseCode.SUCCESS
    resp = await client.invoke(addr, register_request(
        "c1", "broker-empty", "10.0.0.7:10911", 0, body=b"", crc=False), 5000)
    assert resp.code == ResponseCode.SUCCESS  # no body: empty table


async def test_wrong_crc_and_malformed_bodies(start_namesrv, client):
    addr, proc = start_namesrv()
    req = register_request("c1", "broker-a", "10.0.0.1:10911", 0, {"T": 1})
    req.ext_fields["bodyCrc32"] = "12345"
    resp = await client.invoke(addr, req, 5000)
    assert (resp.code, resp.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
    for body, compressed in [(b"{not json", False), (b"\x78\xda garbage", True),
                             (b'{"topicConfigSerializeWrapper":{"topicConfigTable":'
                              b'{"T":{"perm":"rw"}}}}', False)]:
        resp = await client.invoke(addr, register_request(
            "c1", "broker-a", "10.0.0.1:10911", 0, body=body, compressed=compressed), 5000)
        assert resp.code == ResponseCode.SYSTEM_ERROR
        assert resp.remark.startswith("Failed to decode RegisterBrokerBody")
    req = register_request("c1", "broker-a", "10.0.0.1:10911", 0, {"T": 1})
    req.ext_fields["brokerId"] = "master"
    resp = await client.invoke(addr, req, 5000)
    assert resp.code == ResponseCode.SYSTEM_ERROR and "brokerId" in resp.remark
    missing = RemotingCommand.create_request(RequestCode.REGISTER_BROKER, {"brokerName": "x"})
    resp = await client.invoke(addr, missing, 5000)
    assert resp.code == ResponseCode.SYSTEM_ERROR and "is null" in resp.remark
    resp = await call(client, addr, RequestCode.QUERY_DATA_VERSION,
                      {"brokerName": "b", "brokerAddr": "a:1", "clusterName": "c",
                       "brokerId": "0"}, body=b"[oops")
    assert resp.code == ResponseCode.SYSTEM_ERROR
    # garbage on the socket closes that connection only; the server keeps serving
    with socket.create_connection(("127.0.0.1", int(addr.split(":")[1])), timeout=5) as s:
        s.sendall(b"\x00\x00\x00\x08\x00\x00\xff\xffjunkjunk")
        assert s.recv(100) == b""
    assert proc.proc.poll() is None
    assert (await route(client, addr, "T")).code == ResponseCode.TOPIC_NOT_EXIST


async def test_data_version_change_detection(start_namesrv, client):
    addr, _ = start_namesrv()
    await client.invoke(addr, register_request("c1", "broker-a", "10.0.0.1:10911", 0,
                                               {"T": 4}, counter=5), 5000)
    header = {"brokerName": "broker-a", "brokerAddr": "10.0.0.1:10911", "clusterName": "c1",
              "brokerId": "0"}
    same = await call(client, addr, RequestCode.QUERY_DATA_VERSION, header,
                      DataVersion(1700000000000, 5).encode())
    assert same.ext_fields["changed"] == "false"
    assert DataVersion.decode(same.body) == DataVersion(1700000000000, 5)
    newer = await call(client, addr, RequestCode.QUERY_DATA_VERSION, header,
                       DataVersion(1700000000000, 6).encode())
    assert newer.ext_fields["changed"] == "true"
    # same data version: topic data in the body is ignored; new version: applied
    await client.invoke(addr, register_request("c1", "broker-a", "10.0.0.1:10911", 0,
                                               {"T": 8}, counter=5), 5000)
    assert TopicRouteData.decode((await route(client, addr, "T")).body).queueDatas[0].readQueueNums == 4
    await client.invoke(addr, register_request("c1", "broker-a", "10.0.0.1:10911", 0,
                                               {"T": 8}, counter=6), 5000)
    assert TopicRouteData.decode((await route(client, addr, "T")).body).queueDatas[0].readQueueNums == 8


async def test_unregister_delete_topic_and_write_perm(start_namesrv, client):
    addr, _ = start_namesrv()
    await register_two_clusters(client, addr)
    wipe = await call(client, addr, RequestCode.WIPE_WRITE_PERM_OF_BROKER,
                      {"brokerName": "broker-a"})
    assert wipe.ext_fields["wipeTopicCount"] == "2"
    perms = {q.brokerName: q.perm for q in TopicRouteData.decode(
        (await route(client, addr, "Shared")).body).queueDatas}
    assert perms == {"broker-a": 4, "broker-b": 6, "broker-c": 6}
    add = await call(client, addr, RequestCode.ADD_WRITE_PERM_OF_BROKER,
                     {"brokerName": "broker-a"})
    assert add.ext_fields["addTopicCount"] == "2"

    await call(client, addr, RequestCode.DELETE_TOPIC_IN_NAMESRV,
               {"topic": "Shared", "clusterName": "c1"})
    names = [q.brokerName for q in TopicRouteData.decode(
        (await route(client, addr, "Shared")).body).queueDatas]
    assert names == ["broker-c"]
    await call(client, addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "Shared"})
    assert (await route(client, addr, "Shared")).code == ResponseCode.TOPIC_NOT_EXIST

    header = {"brokerName": "broker-c", "clusterName": "c2"}
    for host, bid in (("10.0.1.1:10911", "0"), ("10.0.1.2:10911", "1")):
        resp = await call(client, addr, RequestCode.UNREGISTER_BROKER,
                          {**header, "brokerAddr": host, "brokerId": bid})
        assert resp.code == ResponseCode.SUCCESS
    assert (await route(client, addr, "TopicC")).code == ResponseCode.TOPIC_NOT_EXIST
    ci = ClusterInfo.decode((await call(client, addr, RequestCode.GET_BROKER_CLUSTER_INFO)).body)
    assert set(ci.clusterAddrTable) == {"c1"}


async def test_unit_topic_lists(start_namesrv, client):
    addr, _ = start_namesrv()
    for name, host, flag, topic in [("b1", "10.0.0.1:1", 1, "Unit"), ("b2", "10.0.0.2:1", 2, "Sub"),
                                    ("b3", "10.0.0.3:1", 3, "Both")]:
        body = RegisterBrokerBody(TopicConfigSerializeWrapper(
            {topic: TopicConfig(topic, 1, 1, 6, topicSysFlag=flag)}, DataVersion(1, 1))).encode()
        await client.invoke(addr, register_request("c", name, host, 0, body=body), 5000)

    async def names(code):
        return sorted(TopicList.decode((await call(client, addr, code)).body).topicList)
    assert await names(RequestCode.GET_UNIT_TOPIC_LIST) == ["Both", "Unit"]
    assert await names(RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST) == ["Both", "Sub"]
    assert await names(RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST) == ["Sub"]


async def test_kv_config_and_order_topic_conf_survive_restart(start_namesrv, client, tmp_path):
    addr, proc = start_namesrv(orderMessageEnable="true")
    ns = "ORDER_TOPIC_CONFIG"
    put = await call(client, addr, RequestCode.PUT_KV_CONFIG,
                     {"namespace": ns, "key": "TopicA", "value": "broker-a:4"})
    assert put.code == ResponseCode.SUCCESS
    await call(client, addr, RequestCode.PUT_KV_CONFIG, {"namespace": "N2", "key": "k", "value": "v"})
    await call(client, addr, RequestCode.DELETE_KV_CONFIG, {"namespace": "N2", "key": "k"})
    resp = await client.invoke(addr, register_request("c1", "broker-a", "10.0.0.1:10911", 0,
                                                      {"TopicA": 4}), 5000)
    assert KVTable.decode(resp.body).table == {"TopicA": "broker-a:4"}
    data = TopicRouteData.decode((await route(client, addr, "TopicA")).body)
    assert data.orderTopicConf == "broker-a:4"
    assert proc.stop() == 0
    await client.close()

    addr2, _ = start_namesrv(name="again.conf", orderMessageEnable="true")
    c2 = RemotingClient()
    try:
        got = await call(c2, addr2, RequestCode.GET_KV_CONFIG, {"namespace": ns, "key": "TopicA"})
        assert (got.code, got.ext_fields["value"]) == (ResponseCode.SUCCESS, "broker-a:4")
        missing = await call(c2, addr2, RequestCode.GET_KV_CONFIG, {"namespace": "N2", "key": "k"})
        assert (missing.code, missing.remark) == (ResponseCode.QUERY_NOT_FOUND,
                                                  "No config item, Namespace: N2 Key: k")
        listed = await call(c2, addr2, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": ns})
        assert listed.body == b'{"table":{"TopicA":"broker-a:4"}}'
        none = await call(c2, addr2, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "zz"})
        assert none.code == ResponseCode.QUERY_NOT_FOUND
    finally:
        await c2.close()
    saved = json.loads((tmp_path / "kv" / "kvConfig.json").read_text())
    assert saved["configTable"][ns] == {"TopicA": "broker-a:4"}


async def test_namesrv_config_get_and_update(start_namesrv, client, tmp_path):
    addr, _ = start_namesrv()
    got = await call(client, addr, RequestCode.GET_NAMESRV_CONFIG)
    text = got.body.decode()
    assert "orderMessageEnable=false\n" in text and "listenPort=" in text
    denied = await call(client, addr, RequestCode.UPDATE_NAMESRV_CONFIG,
                        body=b"kvConfigPath=/tmp/x\n")
    assert (denied.code, denied.remark) == (ResponseCode.NO_PERMISSION,
                                            "Can not update config in black list.")
    bad = await call(client, addr, RequestCode.UPDATE_NAMESRV_CONFIG,
                     body=b"brokerChannelExpiredMillis=soon\n")
    assert bad.code == ResponseCode.SYSTEM_ERROR
    ok = await call(client, addr, RequestCode.UPDATE_NAMESRV_CONFIG,
                    body=b"orderMessageEnable=true\n")
    assert ok.code == ResponseCode.SUCCESS
    got = await call(client, addr, RequestCode.GET_NAMESRV_CONFIG)
    assert "orderMessageEnable=true\n" in got.body.decode()
    assert "orderMessageEnable=true" in (tmp_path / "namesrv.conf").read_text()


@pytest.mark.timeout(40)
async def test_expiry_with_shortened_intervals(start_namesrv, client):
    addr, _ = start_namesrv(brokerChannelExpiredMillis=1500,
                            scanNotActiveBrokerIntervalMillis=200)
    silent = RemotingClient()  # each broker has its own connection, as real ones do
    await silent.invoke(addr, register_request("c1", "broker-a", "10.0.0.1:10911", 0,
                                               {"Gone": 1}), 5000)
    await client.invoke(addr, register_request("c1", "broker-b", "10.0.0.2:10911", 0,
                                               {"Kept": 1}), 5000)
    assert (await route(client, addr, "Gone")).code == ResponseCode.SUCCESS
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        # broker-b keeps registering (its heartbeat); broker-a stays silent
        await client.invoke(addr, register_request("c1", "broker-b", "10.0.0.2:10911", 0,
                                                   {"Kept": 1}), 5000)
        if (await route(client, addr, "Gone")).code == ResponseCode.TOPIC_NOT_EXIST:
            break
        await asyncio.sleep(0.2)
    else:
        pytest.fail("silent broker was never expired")
    assert (await route(client, addr, "Kept")).code == ResponseCode.SUCCESS
    await silent.close()


async def test_connection_close_removes_broker_at_once(start_namesrv, client):
    addr, _ = start_namesrv()
    broker = RemotingClient()
    resp = await broker.invoke(addr, register_request("c1", "broker-a", "10.0.0.1:10911", 0,
                                                      {"T": 2}), 5000)
    assert resp.code == ResponseCode.SUCCESS
    assert (await route(client, addr, "T")).code == ResponseCode.SUCCESS
    await broker.close()
    deadline = time.monotonic() + 10
    while (await route(client, addr, "T")).code != ResponseCode.TOPIC_NOT_EXIST:
        assert time.monotonic() < deadline, "route survived the broker's connection"
        await asyncio.sleep(0.05)
    ci = ClusterInfo.decode((await call(client, addr, RequestCode.GET_BROKER_CLUSTER_INFO)).body)
    assert ci.brokerAddrTable == {} and ci.clusterAddrTable == {}


async def test_oneway_register_is_applied_without_answer(start_namesrv, client):
    addr, _ = start_namesrv()
    await client.invoke_oneway(addr, register_request("c1", "broker-a", "10.0.0.1:10911", 0,
                                                      {"T": 1}))
    deadline = time.monotonic() + 10
    while (await route(client, addr, "T")).code != ResponseCode.SUCCESS:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.05)


async def test_two_name_servers_side_by_side(start_namesrv, client, tmp_path):
    a, _ = start_namesrv(name="a.conf", kvConfigPath=tmp_path / "kv-a.json")
    b, _ = start_namesrv(name="b.conf", kvConfigPath=tmp_path / "kv-b.json")
    for addr in (a, b):
        await client.invoke(addr, register_request("c1", "broker-a", "10.0.0.1:10911", 0,
                                                   {"T": 1}), 5000)
    await call(client, a, RequestCode.PUT_KV_CONFIG, {"namespace": "N", "key": "k", "value": "v"})
    await call(client, a, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T"})
    assert (await route(client, a, "T")).code == ResponseCode.TOPIC_NOT_EXIST
    assert (await route(client, b, "T")).code == ResponseCode.SUCCESS
    got = await call(client, b, RequestCode.GET_KV_CONFIG, {"namespace": "N", "key": "k"})
    assert got.code == ResponseCode.QUERY_NOT_FOUND


def test_print_config_and_help(tmp_path):
    port = free_port()
    res = run_cli(MODULE, ["-c", write_conf(tmp_path, port), "-p"])
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert f"listenPort={port}" in lines
    assert f"configStorePath={tmp_path / 'namesrv.conf'}" in lines
    assert "orderMessageEnable=false" in lines and "brokerChannelExpiredMillis=120000" in lines
    res = run_cli(MODULE, ["-p"])
    assert "listenPort=9876" in res.stdout.splitlines()
    res = run_cli(MODULE, ["-h"])
    assert res.returncode == 0 and "--configFile" in res.stdout


@pytest.mark.parametrize("content,needle", [
    ("strictConfig=true\nlistenPortt=1\n", "unknown setting(s)"),
    ("listenPort=ninety\n", "bad value(s)"),
    ("scanNotActiveBrokerIntervalMillis=0\n", "must be > 0"),
    ("listenPort=70000\n", "out of range"),
])
def test_bad_config_file_is_refused(tmp_path, content, needle):
    conf = tmp_path / "bad.conf"
    conf.write_text(content)
    res = run_cli(MODULE, ["-c", str(conf)])
    assert res.returncode == 1
    assert needle in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_unknown_key_warns_and_strict_mode_refuses_it(tmp_path):
    conf = tmp_path / "typo.conf"
    conf.write_text("listenPortt=1\n")
    res = run_cli(MODULE, ["-c", str(conf), "-p"])
    assert res.returncode == 0, res.stderr
    assert f"config file {conf}: unknown key listenPortt ignored" in res.stderr
    res = run_cli(MODULE, ["-c", str(conf), "--strict", "-p"])
    assert res.returncode == 1 and "unknown setting(s)" in res.stderr


def test_missing_config_file_and_bad_option(tmp_path):
    res = run_cli(MODULE, ["-c", str(tmp_path / "nope.conf")])
    assert res.returncode == 1 and "cannot read config file" in res.stderr
    res = run_cli(MODULE, ["--bogus"])
    assert res.returncode == 1


def test_corrupt_kv_file_refuses_to_start(tmp_path):
    (tmp_path / "kv").mkdir()
    (tmp_path / "kv" / "kvConfig.json").write_text("{{{{")
    res = run_cli(MODULE, ["-c", write_conf(tmp_path, free_port())])
    assert res.returncode == 253 and "not valid JSON" in res.stderr


def test_port_already_in_use(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        res = run_cli(MODULE, ["-c", write_conf(tmp_path, port)])
    assert res.returncode == 255
    assert f"cannot listen on 127.0.0.1:{port}" in res.stderr


def test_boot_line_log_file_and_graceful_stop(procs, tmp_path):
    port = free_port()
    proc = procs(MODULE, ["-c", write_conf(tmp_path, port)]).start(wait_for_port=port)
    deadline = time.monotonic() + 10
    while "boot success" not in proc.output():
        assert time.monotonic() < deadline, proc.output()
        time.sleep(0.05)
    assert "The Name Server boot success. serializeType=JSON" in proc.output()
    assert proc.stop() == 0
    log_text = (tmp_path / "logs" / "namesrv.log").read_text()
    assert "boot success" in log_text and "name server stopped" in log_text


def test_rocketmq_home_places_logs(procs, tmp_path):
    port = free_port()
    conf = tmp_path / "n.conf"
    conf.write_text(f"listenPort={port}\nbindAddress=127.0.0.1\n"
                    f"kvConfigPath={tmp_path / 'kv.json'}\n")
    home = tmp_path / "home"
    proc = procs(MODULE, ["-c", str(conf)], env={"ROCKETMQ_HOME": str(home)})
    proc.start(wait_for_port=port)
    assert proc.stop() == 0
    assert (home / "logs" / "rocketmqlogs" / "namesrv.log").exists()
