"""Plain ACL on a real rmq-broker process (aclEnable=true, rules in
$ROCKETMQ_HOME/conf/plain_acl.yml and conf/acl/): refusals as 4.9.8 answers
them, signed rmq clients producing and consuming, white-listed addresses
(requests sent from other loopback addresses), hot reload of edited, broken
and added files, the ACL admin codes on the wire and through rmq-admin."""

from __future__ import annotations

import asyncio
import struct
import time
from pathlib import Path

import orjson
import pytest
import yaml

from rmq.acl import AclClientRPCHook, SessionCredentials
from rmq.client import (
    ClientConfig,
    ConsumeStatus,
    Message,
    Producer,
    ProducerConfig,
    PushConsumer,
)
from rmq.client.exceptions import MQBrokerError
from rmq.client.headers import pull_header
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import RemotingClient, RemotingCommand
from rmq.testing.cluster import Cluster
from rmq.testing.procs import RmqProcess, free_port, run_cli
from rmq.testing.wait import wait_until

R = RequestCode
RC = ResponseCode
REFUSED = "org.apache.rocketmq.acl.common.AclException: "

RULES = """\
globalWhiteRemoteAddresses:
  - 127.0.0.2
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - TopicAcl=PUB|SUB
      - TopicSubOnly=SUB
    groupPerms:
      - cgAcl=SUB
  - accessKey: rocketmq2
    secretKey: 12345678
    admin: true
  - accessKey: whiteKey1
    secretKey: whiteSecret1
    whiteRemoteAddress: 127.0.0.3
    admin: true
"""


def is_refusal(r: RemotingCommand, message: str) -> bool:
    """4.9.8's answer to a refused request: SYSTEM_ERROR, the exception and
    where it was raised (``RemotingHelper.exceptionSimpleDesc``)."""
    return r.code == RC.SYSTEM_ERROR and (r.remark or "").startswith(f"{REFUSED}{message}, ")


def acl_cluster(tmp_path: Path, rules: str = RULES) -> Cluster:
    (tmp_path / "conf").mkdir(exist_ok=True)
    (tmp_path / "conf" / "plain_acl.yml").write_text(rules)
    c = Cluster(tmp_path, "aclEnable=true\nautoCreateTopicEnable=false\ntraceTopicEnable=true\n")
    c.start_broker()
    return c


@pytest.fixture
async def cluster(tmp_path):
    c = acl_cluster(tmp_path)
    yield c
    await c.close()


def signer(ak: str, sk: str) -> RemotingClient:
    client = RemotingClient()
    client.register_rpc_hook(AclClientRPCHook(SessionCredentials(ak, sk)))
    return client


async def call(client: RemotingClient, addr: str, code: int, header=None,
               body=None) -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.create_request(code, header, body), 5000)


async def call_from(ip: str, port: int, request: RemotingCommand) -> RemotingCommand:
    """One request on a fresh connection from local address ``ip`` (loopback
    has all of 127.0.0.0/8), the response decoded."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(ip, 0))
    try:
        writer.write(request.encode())
        await writer.drain()
        (length,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))
        return RemotingCommand.decode(await reader.readexactly(length))
    finally:
        writer.close()


async def create_topic(c: Cluster, topic: str) -> None:
    admin = signer("rocketmq2", "12345678")
    try:
        r = await call(admin, c.addr, R.UPDATE_AND_CREATE_TOPIC, {
            "topic": topic, "defaultTopic": "TBW102", "readQueueNums": 2, "writeQueueNums": 2,
            "perm": 6, "topicFilterType": "SINGLE_TAG"})
        assert r.code == RC.SUCCESS, r.remark
    finally:
        await admin.close()


async def test_refusals_are_system_errors_and_the_connection_stays_usable(cluster):
    c = cluster
    r = await c.call(R.GET_BROKER_RUNTIME_INFO)
    assert is_refusal(r, "No accessKey is configured"), r.remark
    channel = c.client._table[c.addr]
    c.client.register_rpc_hook(AclClientRPCHook(SessionCredentials("RocketMQ", "wrong___")))
    r = await c.call(R.GET_BROKER_RUNTIME_INFO)
    assert is_refusal(r, "Check signature failed for accessKey=RocketMQ")
    c.client._rpc_hooks.clear()
    c.client.register_rpc_hook(AclClientRPCHook(SessionCredentials("RocketMQ", "12345678")))
    r = await c.call(R.GET_BROKER_RUNTIME_INFO)
    assert r.code == RC.SUCCESS and b"brokerVersionDesc" in r.body
    r = await c.call(R.UPDATE_AND_CREATE_TOPIC, {"topic": "T1", "defaultTopic": "TBW102",
                                                 "readQueueNums": 1, "writeQueueNums": 1,
                                                 "perm": 6, "topicFilterType": "SINGLE_TAG"})
    assert is_refusal(r, "Need admin permission for request code=17, but accessKey=RocketMQ "
                         "is not")
    assert c.client._table[c.addr] is channel  # one connection all along
    # the fast port checks too
    r = await call_from("127.0.0.1", c.port - 2, RemotingCommand.create_request(
        R.GET_BROKER_RUNTIME_INFO))
    assert is_refusal(r, "No accessKey is configured")


async def test_signed_clients_produce_and_consume_within_their_permissions(cluster):
    c = cluster
    await create_topic(c, "TopicAcl")
    await create_topic(c, "TopicSubOnly")
    await c.wait_registered()
    ns = f"127.0.0.1:{c.ns_port}"

    def config(sk: str = "12345678") -> ClientConfig:
        return ClientConfig(namesrv_addr=ns, client_ip="127.0.0.1", access_key="RocketMQ",
                            secret_key=sk)

    received: list[bytes] = []

    async def listener(msgs, _ctx):
        received.extend(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("cgAcl", client_config=config())
    consumer.subscribe("TopicAcl", "*")
    consumer.register_listener(listener)
    await consumer.start()
    try:
        traced = ProducerConfig(enable_msg_trace=True)
        async with Producer("pgAcl", config=traced, client_config=config()) as producer:
            for i in range(10):
                res = await producer.send(Message("TopicAcl", f"m{i}".encode()))
                assert res.status.name == "SEND_OK"
            with pytest.raises(MQBrokerError) as info:
                await producer.send(Message("TopicSubOnly", b"x"))
            assert info.value.code == RC.SYSTEM_ERROR
            assert REFUSED + "No default permission for topic:TopicSubOnly" in str(info.value)
        await wait_until(lambda: len(received) >= 10, 30)
        assert sorted(received) == sorted(f"m{i}".encode() for i in range(10))
        # the sends and pulls the ACL passed were served by the lanes (but the
        # first send into each of the 2 queues, which makes its consume queue;
        # the push consumer's pulls were held until the sends and answered by
        # long polling, so a signed pull of what is stored is made here); the
        # refused send was stored by none
        admin = signer("rocketmq2", "12345678")
        try:
            r = await call(admin, c.addr, R.PULL_MESSAGE, pull_header(
                "cgAcl", "TopicAcl", 0, 0, 32, 2, 0, 0, "*", 0, "TAG", "broker-a"))
            assert r.code == RC.SUCCESS and r.body, r
            r = await call(admin, c.addr, R.GET_BROKER_RUNTIME_INFO)
            table = orjson.loads(r.body)["table"]
            assert int(table["rmqSendLaneServed"]) >= 8, table
            assert int(table["rmqPullLaneServed"]) >= 1, table
            for q in range(2):
                r = await call(admin, c.addr, R.GET_MAX_OFFSET,
                               {"topic": "TopicSubOnly", "queueId": q})
                assert r.code == RC.SUCCESS and r.ext_fields["offset"] == "0"
        finally:
            await admin.close()
        # the trace records went out signed with the producer's keys (the account
        # has no permission on RMQ_SYS_TRACE_TOPIC: trace sends are never refused)
        admin = signer("rocketmq2", "12345678")
        try:
            async def traced_records() -> int:
                total = 0
                for q in range(8):
                    r = await call(admin, c.addr, R.GET_MAX_OFFSET,
                                   {"topic": "RMQ_SYS_TRACE_TOPIC", "queueId": q})
                    total += int(r.ext_fields["offset"]) if r.code == RC.SUCCESS else 0
                return total

            await wait_until(lambda: _positive(traced_records()), 30)
        finally:
            await admin.close()
        async with Producer("pgAclBad", client_config=config("wrong___")) as producer:
            with pytest.raises(MQBrokerError) as info:
                await producer.send(Message("TopicAcl", b"x"))
            assert "Check signature failed for accessKey=RocketMQ" in str(info.value)
    finally:
        await consumer.shutdown()


async def test_white_listed_addresses_need_no_signature(cluster):
    c = cluster
    runtime = RemotingCommand.create_request(R.GET_BROKER_RUNTIME_INFO)
    assert (await call_from("127.0.0.2", c.port, runtime)).code == RC.SUCCESS  # global white
    r = await call_from("127.0.0.4", c.port, RemotingCommand.create_request(
        R.GET_BROKER_RUNTIME_INFO))
    assert is_refusal(r, "No accessKey is configured")
    # the account's own white address: its key, no signature
    for ip, ok in (("127.0.0.3", True), ("127.0.0.1", False)):
        r = await call_from(ip, c.port, RemotingCommand.create_request(
            R.GET_BROKER_RUNTIME_INFO, {"AccessKey": "whiteKey1"}))
        assert (r.code == RC.SUCCESS) is ok, r.remark
        if not ok:
            assert is_refusal(r, "Check signature failed for accessKey=whiteKey1")


async def test_edited_added_and_broken_files_apply_within_a_second(cluster, tmp_path):
    c = cluster
    plain = tmp_path / "conf" / "plain_acl.yml"
    newbie = signer("newUser01", "newSecret1")
    try:
        async def accepted() -> bool:
            return (await call(newbie, c.addr, R.GET_BROKER_RUNTIME_INFO)).code == RC.SUCCESS

        assert not await accepted()
        begin = time.monotonic()
        plain.write_text(RULES + "  - accessKey: newUser01\n    secretKey: newSecret1\n")
        await wait_until(accepted, 10)
        took = time.monotonic() - begin
        print(f"edited plain_acl.yml applied after {took:.2f} s")
        assert took < 5  # 0.5 s poll + parse; the margin is for a loaded machine

        # a broken edit: logged, and the last good rules stay in force
        plain.write_text(RULES + "  - accessKey: [broken\n")
        log = tmp_path / "logs" / "rocketmqlogs" / "broker.log"
        await wait_until(lambda: f"ACL file {plain} not applied, the rules it had before stay "
                                 f"in force: {plain} is not valid YAML" in log.read_text(), 10)
        assert await accepted()

        # a new file under conf/acl/ (a sub-directory too)
        team = tmp_path / "conf" / "acl" / "team"
        team.mkdir(parents=True)
        (team / "team.yml").write_text("accounts:\n  - accessKey: teamKey1\n"
                                       "    secretKey: teamSecret1\n    admin: true\n")
        team_client = signer("teamKey1", "teamSecret1")
        try:
            await wait_until(lambda: _ok(call(team_client, c.addr, R.GET_BROKER_RUNTIME_INFO)), 10)
        finally:
            await team_client.close()

        # the repaired file applies, and without the new account
        plain.write_text(RULES)
        await wait_until(lambda: _not(accepted()), 10)
    finally:
        await newbie.close()


async def _positive(awaitable) -> bool:
    return await awaitable > 0


async def _ok(awaitable) -> bool:
    return (await awaitable).code == RC.SUCCESS


async def _not(awaitable) -> bool:
    return not await awaitable


async def test_acl_admin_codes_on_the_wire(cluster, tmp_path):
    c = cluster
    admin = signer("rocketmq2", "12345678")
    try:
        r = await call(admin, c.addr, R.GET_BROKER_CLUSTER_ACL_INFO)
        assert r.code == RC.SUCCESS
        h = r.ext_fields
        assert (h["brokerName"], h["brokerAddr"], h["clusterName"]) == (
            "broker-a", c.addr, "DefaultCluster")
        plain = str(tmp_path / "conf" / "plain_acl.yml")
        assert orjson.loads(h["allAclFileVersion"])[plain]["counter"] == 0
        assert orjson.loads(h["version"])["counter"] == 0

        r = await call(admin, c.addr, R.UPDATE_AND_CREATE_ACL_CONFIG, {
            "accessKey": "wireUser1", "secretKey": "wireSecret1", "admin": "false",
            "defaultTopicPerm": "PUB", "topicPerms": "TopicX=SUB,TopicY=DENY"})
        assert (r.code, r.remark) == (RC.SUCCESS, None)
        data = yaml.safe_load(Path(plain).read_text())
        assert data["accounts"][-1]["topicPerms"] == ["TopicX=SUB", "TopicY=DENY"]
        assert data["dataVersion"][0]["counter"] == 1
        r = await call(admin, c.addr, R.GET_BROKER_CLUSTER_ACL_INFO)
        assert orjson.loads(r.ext_fields["version"])["counter"] == 1

        r = await call(admin, c.addr, R.UPDATE_AND_CREATE_ACL_CONFIG,
                       {"accessKey": "short", "secretKey": "12345678"})
        assert r.code == RC.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
        assert r.remark == ("The accessKey=short and secretKey=12345678 cannot be null and "
                            "length should longer than 6")
        r = await call(admin, c.addr, R.UPDATE_AND_CREATE_ACL_CONFIG, {"secretKey": "12345678"})
        assert r.code == RC.SYSTEM_ERROR  # the header's required field

        r = await call(admin, c.addr, R.GET_BROKER_CLUSTER_ACL_CONFIG)
        body = orjson.loads(r.body)
        assert body["globalWhiteAddrs"] == ["127.0.0.2"]
        assert [a["accessKey"] for a in body["plainAccessConfigs"]] == [
            "RocketMQ", "rocketmq2", "whiteKey1", "wireUser1"]

        r = await call(admin, c.addr, R.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                       {"globalWhiteAddrs": "127.0.0.2,127.0.0.5", "aclFileFullPath": ""})
        assert r.code == RC.SUCCESS
        assert (await call_from("127.0.0.5", c.port, RemotingCommand.create_request(
            R.GET_BROKER_RUNTIME_INFO))).code == RC.SUCCESS
        r = await call(admin, c.addr, R.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                       {"globalWhiteAddrs": "1.1.1.1", "aclFileFullPath": c.conf})
        assert (r.code, r.remark) == (RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED,
                                      "The globalWhiteAddresses[1.1.1.1] has been updated failed.")
        assert "1.1.1.1" not in Path(c.conf).read_text()

        r = await call(admin, c.addr, R.DELETE_ACL_CONFIG, {"accessKey": "wireUser1"})
        assert r.code == RC.SUCCESS
        r = await call(admin, c.addr, R.DELETE_ACL_CONFIG, {"accessKey": "wireUser1"})
        assert (r.code, r.remark) == (RC.DELETE_ACL_CONFIG_FAILED, "The accesskey[wireUser1] "
                                      "corresponding to accessConfig has been deleted failed.")
        # a non-admin account may not list the rules (they hold every secret)
        user = signer("RocketMQ", "12345678")
        try:
            r = await call(user, c.addr, R.GET_BROKER_CLUSTER_ACL_CONFIG)
            assert r.remark.startswith(REFUSED + "Need admin permission for request code=54")
        finally:
            await user.close()
    finally:
        await admin.close()


async def test_rmq_admin_acl_commands_sign_with_tools_yml_or_options(cluster, tmp_path):
    c = cluster
    await c.wait_registered()
    ns = f"127.0.0.1:{c.ns_port}"
    home = {"ROCKETMQ_HOME": str(tmp_path)}

    def admin(*args: str, env: dict | None = None):
        return run_cli("rmq.tools.admin", [args[0], "-n", ns, *args[1:]], env=env or {
            "ROCKETMQ_HOME": str(tmp_path / "nowhere")})

    refused = await asyncio.to_thread(admin, "clusterAclConfigVersion", "-b", c.addr)
    assert refused.returncode == 1 and "No accessKey is configured" in refused.stderr
    (tmp_path / "conf" / "tools.yml").write_text("accessKey: rocketmq2\nsecretKey: 12345678\n")
    res = await asyncio.to_thread(
        admin, "updateAclConfig", "-c", "DefaultCluster", "-a", "cliUser01", "-s", "cliSecret1",
        "-t", "TopicA=PUB,TopicB=SUB", "-i", "DENY", "-m", "false", env=home)
    assert res.returncode == 0, res.stderr
    assert "cliUser01" in res.stdout and "TopicA=PUB" in res.stdout
    res = await asyncio.to_thread(admin, "clusterAclConfigVersion", "-c", "DefaultCluster",
                                  "--json", env=home)
    assert res.returncode == 0, res.stderr
    rows = orjson.loads(res.stdout)
    assert rows[0]["AclConfigVersionNum"] == 1 and rows[0]["Broker Addr"] == c.addr
    res = await asyncio.to_thread(admin, "getAclConfig", "-b", c.addr, "--signAccessKey",
                                  "rocketmq2", "--signSecretKey", "12345678")
    assert res.returncode == 0, res.stderr
    assert "cliUser01" in res.stdout and "globalWhiteRemoteAddress" in res.stdout
    res = await asyncio.to_thread(admin, "updateGlobalWhiteAddr", "-b", c.addr, "-g",
                                  "127.0.0.2,127.0.0.6", env=home)
    assert res.returncode == 0, res.stderr
    assert yaml.safe_load((tmp_path / "conf" / "plain_acl.yml").read_text())[
        "globalWhiteRemoteAddresses"] == ["127.0.0.2", "127.0.0.6"]
    res = await asyncio.to_thread(admin, "deleteAccessConfig", "-b", c.addr, "-a", "cliUser01",
                                  env=home)
    assert res.returncode == 0, res.stderr
    res = await asyncio.to_thread(admin, "deleteAclConfig", "-b", c.addr, "-a", "cliUser01",
                                  env=home)
    assert res.returncode == 1 and "has been deleted failed" in res.stderr


def test_rules_that_do_not_load_stop_the_broker(tmp_path):
    (tmp_path / "conf" / "acl").mkdir(parents=True)
    (tmp_path / "conf" / "acl" / "bad.yml").write_text(
        "accounts:\n  - accessKey: RocketMQ\n    secretKey: 123\n")
    port = free_port(span=4) + 2
    conf = tmp_path / "broker.conf"
    conf.write_text(f"listenPort={port}\nstorePathRootDir={tmp_path / 'store'}\n"
                    "mappedFileSizeCommitLog=1048576\naclEnable=true\n")
    broker = RmqProcess("rmq.broker.startup", ["-c", str(conf)], tmp_path / "broker.out",
                        env={"ROCKETMQ_HOME": str(tmp_path)})
    broker.start()
    try:
        assert broker.wait(60) == 253
    finally:
        broker.kill()
    assert (f"broker initialize failed: ACL: {tmp_path}/conf/acl/bad.yml: The accessKey=RocketMQ "
            f"and secretKey=123 cannot be null") in broker.output()
