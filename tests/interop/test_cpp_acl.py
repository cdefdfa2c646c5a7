"""The real C++ client (PyPI ``rocketmq``, session credentials) against an rmq
broker with plain ACL: it signs as the Java broker expects (its extra
``OnsChannel`` field is signed too), produces and consumes within its
permissions, and a wrong secret, a missing permission or an address that is
neither white-listed nor signing fail as they fail against 4.9.8."""

from __future__ import annotations

import asyncio

import pytest

from rmq.acl import AclClientRPCHook, SessionCredentials
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import RemotingClient, RemotingCommand
from tests.interop.harness import (
    Cluster,
    CppRunner,
    OnsRunner,
    PushGroup,
    assert_ok,
    ensure_node_clients,
)
from tests.interop.messages import text_message

pytestmark = pytest.mark.timeout(150)

RULES = """\
accounts:
  - accessKey: cppUser01
    secretKey: cppSecret01
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - TopicCppAcl=PUB|SUB
      - TopicCppSubOnly=SUB
    groupPerms:
      - cgCppAcl=SUB
  - accessKey: cppAdmin01
    secretKey: cppAdminSecret
    admin: true
  - accessKey: cppNearby1
    secretKey: cppNearbySecret
    whiteRemoteAddress: 127.0.0.1
    defaultTopicPerm: PUB
"""
USER = {"access_key": "cppUser01", "secret_key": "cppSecret01"}
REFUSAL = "org.apache.rocketmq.acl.common.AclException: "


@pytest.fixture
def acl(tmp_path):
    c = Cluster(tmp_path / "cluster", auto_create=False, extra="aclEnable=true\n")
    (c.tmp / "conf").mkdir(parents=True)
    (c.tmp / "conf" / "plain_acl.yml").write_text(RULES)
    c.start()
    runner = CppRunner(tmp_path, c)
    yield c, runner
    runner.close()
    c.stop()
    print(c.outputs())


def admin_call(c: Cluster, code: int, header: dict) -> RemotingCommand:
    """One request signed by the admin account (rmq's own signer)."""

    async def invoke() -> RemotingCommand:
        client = RemotingClient()
        client.register_rpc_hook(AclClientRPCHook(SessionCredentials("cppAdmin01",
                                                                     "cppAdminSecret")))
        try:
            return await client.invoke(c.broker_addr,
                                       RemotingCommand.create_request(code, header), 5000)
        finally:
            await client.close()

    return asyncio.run(invoke())


def create_topic(c: Cluster, topic: str) -> None:
    r = admin_call(c, RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4",
        "perm": "6", "topicFilterType": "SINGLE_TAG"})
    assert r.code == ResponseCode.SUCCESS, r.remark
    c.wait_routed(topic)


def produce(cpp: CppRunner, topic: str, keys: list[str], credentials: dict | None) -> list[dict]:
    spec = {"op": "produce", "messages": [text_message(topic, k) for k in keys]}
    if credentials is not None:
        spec["credentials"] = credentials
    res = cpp.run(spec)
    assert res["ok"], res
    return res["results"]


def test_signed_cpp_clients_produce_and_consume(acl):
    c, cpp = acl
    create_topic(c, "TopicCppAcl")
    keys = [f"acl-{i}" for i in range(6)]
    results = produce(cpp, "TopicCppAcl", keys, USER)
    assert all(r["ok"] and r["status"] == "OK" for r in results), results
    group = PushGroup(cpp, "cgCppAcl", "TopicCppAcl", credentials=USER)
    got = group.wait_for(lambda rs: {r["keys"] for r in rs} >= set(keys), timeout=60)
    assert_ok(group.stop())
    assert {r["keys"] for r in got} == set(keys)
    r = admin_call(c, RequestCode.QUERY_CONSUMER_OFFSET,
                   {"consumerGroup": "cgCppAcl", "topic": "TopicCppAcl", "queueId": "0"})
    assert r.code == ResponseCode.SUCCESS  # the consumer's signed offset commits arrived
    # A C++ producer unregisters with consumerGroup "": 4.9.8 checks the group
    # "%RETRY%" against defaultGroupPerm (DENY here) and refuses it just the same.
    cpp.assert_clean_logs(expected=(
        f"unregisterClient fail:{REFUSAL}No default permission for group:,",))


def _refused(cpp: CppRunner, results: list[dict], message: str) -> None:
    """How the C++ client reports a send the broker refused: the send fails
    after its retries (with its "No route info" text) and its log has the
    broker's answer, SYSTEM_ERROR (code 1) with the AclException remark."""
    assert len(results) == 1 and not results[0]["ok"], results
    assert "ProducerSendSyncFailed" in results[0]["error"], results
    log = "".join(p.read_text(errors="replace")
                  for p in (cpp.homes[-1] / "logs").rglob("*rocketmq-cpp.log*"))
    assert f"processSendResponse error remark:{REFUSAL}{message}" in log, log[-3000:]
    assert "error code:1[" in log


def test_wrong_secret_missing_permission_and_unsigned_address_are_refused(acl):
    c, cpp = acl
    create_topic(c, "TopicCppAcl")
    create_topic(c, "TopicCppSubOnly")
    wrong = dict(USER, secret_key="notTheSecret")
    _refused(cpp, produce(cpp, "TopicCppAcl", ["w-1"], wrong),
             "Check signature failed for accessKey=cppUser01")
    _refused(cpp, produce(cpp, "TopicCppSubOnly", ["p-1"], USER),
             "No default permission for topic:TopicCppSubOnly")
    # no credentials: the client still sends an empty AccessKey, which no account has
    _refused(cpp, produce(cpp, "TopicCppAcl", ["u-1"], None), "No acl config for ,")
    # an account whose white address is the client's: its signature is not checked
    nearby = {"access_key": "cppNearby1", "secret_key": "anything"}
    assert [r["ok"] for r in produce(cpp, "TopicCppAcl", ["n-1"], nearby)] == [True]
    assert cpp.log_problems(expected=(
        REFUSAL, "send error", "send failed of times", "could not find property mq",
        "No route info of this topic", "unregisterClient fail",
        # a refused client's heartbeat, when one falls inside its run, is refused
        # too: 4.9.8 answers the ACL hook's AclException with SYSTEM_ERROR (1)
        "get error response:1 of heartbeat")) == []


def test_ali_ons_signs_with_access_key_id_and_secret(acl):
    """ali-ons (npm) with ``accessKeyId``/``accessKeySecret``: produces and
    consumes; a wrong secret and a missing permission surface as the
    broker's SYSTEM_ERROR with the AclException remark."""
    c, _cpp = acl
    ensure_node_clients()
    ons = OnsRunner(c.tmp / "ons", c)
    ons.tmp.mkdir()
    try:
        create_topic(c, "TopicCppAcl")
        create_topic(c, "TopicCppSubOnly")
        keys = [f"ons-{i}" for i in range(4)]
        sent = ons.run({"op": "produce", "credentials": USER,
                        "messages": [text_message("TopicCppAcl", k) for k in keys]})
        assert sent["ok"] and all(r["ok"] for r in sent["results"]), sent
        group = PushGroup(ons, "cgCppAcl", "TopicCppAcl", credentials=USER)
        got = group.wait_for(lambda rs: {r["keys"] for r in rs} >= set(keys), timeout=60)
        assert_ok(group.stop())
        assert {r["keys"] for r in got} == set(keys)
        # a wrong secret: the producer's start (its heartbeat) already fails
        res = ons.run({"op": "produce", "credentials": dict(USER, secret_key="notTheSecret"),
                       "messages": [text_message("TopicCppAcl", "refused")]})
        assert not res["ok"], res
        assert res["error"].startswith(
            f"MQClientException: {REFUSAL}Check signature failed for accessKey=cppUser01"), res
        # no credentials, from an address no rule white-lists: refused the same way
        res = ons.run({"op": "produce", "messages": [text_message("TopicCppAcl", "bare")]})
        assert not res["ok"], res
        assert res["error"].startswith(f"MQClientException: {REFUSAL}No accessKey is configured")
        # a missing permission: ali-ons retries a SYSTEM_ERROR send, then gives up
        # with its own text; the broker's log shows why
        res = ons.run({"op": "produce", "credentials": USER,
                       "messages": [text_message("TopicCppSubOnly", "refused")]})
        assert res["ok"], res
        (outcome,) = res["results"]
        assert not outcome["ok"], outcome
        assert "times, still failed" in outcome["error"] and "TopicCppSubOnly" in outcome["error"]
        log = (c.tmp / "logs" / "rocketmqlogs" / "broker.log").read_text()
        assert "refused: No default permission for topic:TopicCppSubOnly" in log
    finally:
        ons.close()
