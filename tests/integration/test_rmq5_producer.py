"""Apache's official RocketMQ 5.x Python client (PyPI ``rocketmq-python-client``
5.1.2), and its Node.js client (npm ``rocketmq-client-nodejs``), against a real
rmq-broker's gRPC endpoint: normal, FIFO, delay and
transactional sends (commit, rollback, and the check-back over Telemetry),
each message then pulled over remoting as a 4.x client sees it, with tags,
keys, user properties and the client's message id intact; 5.3.3's statuses for
bad input.

The client runs in its own virtualenv (``make rmq5-client``: ``.venv-rmq5``;
its package ``rocketmq`` clashes with the C++ wrapper the interop tests use),
created here when missing.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from rmq.acl import AclClientRPCHook, SessionCredentials
from rmq.client.codec import decode_messages
from rmq.client.headers import pull_header
from rmq.common.codes import RequestCode as R
from rmq.common.codes import ResponseCode
from rmq.proxy.v2 import definition_pb2 as pb
from rmq.proxy.v2 import service_pb2 as spb
from rmq.proxy.v2 import service_pb2_grpc as sgrpc
from rmq.testing.cluster import Cluster
from rmq.testing.messaging import grpc_cluster
from rmq.testing.procs import free_port, wait_port

pytestmark = [pytest.mark.once, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv-rmq5"
CLIENT = ROOT / "tests" / "rmq5" / "producer_client.py"
TOPIC = "T5"


def client_python() -> Path:
    """The client's interpreter, its virtualenv created from PyPI when missing."""
    python = VENV / "bin" / "python"
    if not (VENV / ".installed-stamp").exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True, timeout=120)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q",
                        "rocketmq-python-client==5.1.2"], check=True, timeout=600)
        (VENV / ".installed-stamp").touch()
    return python


@pytest.fixture
async def cluster(tmp_path):
    async for c in rmq5_cluster(tmp_path):
        yield c


async def rmq5_cluster(tmp_path, extra: str = ""):
    """A broker with its gRPC port and topic TOPIC (``extra`` lines go into
    broker.conf), and the official client's interpreter as ``c.python``."""
    python = client_python()
    # topic attributes (message.type) come with the 5.x topic work; until then the
    # type check is off so FIFO/delay/transaction messages reach a plain topic
    async with grpc_cluster(tmp_path, "transactionCheckInterval=1000\ntransactionTimeOut=1000\n"
                            f"enableTopicMessageTypeCheck=false\n{extra}", topic=TOPIC) as c:
        c.python = python
        yield c


def run_client(c, scenario: str, check_wait: float = 20.0, topic: str = TOPIC,
               account: tuple[str, str] = ("", "")) -> list[dict]:
    done = subprocess.run([str(c.python), str(CLIENT), f"127.0.0.1:{c.grpc_port}", scenario,
                           topic, str(check_wait), "1"],
                          capture_output=True, text=True, timeout=90,
                          env={**os.environ, "PYTHONPATH": "", "RMQ5_AK": account[0],
                               "RMQ5_SK": account[1]})
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines[-1] == {"done": True}, lines
    return lines


async def visible(c) -> dict[str, object]:
    """body -> message, of everything pullable from the topic's queues."""
    out = {}
    for qid in range(4):
        r = await c.call(R.PULL_MESSAGE, pull_header("cg4", TOPIC, qid, 0, 32, 4, 0, 0, "*", 0,
                                                     "TAG", "broker-a"))
        if r.code == ResponseCode.SUCCESS:
            for m in decode_messages(r.body):
                out[m.body.decode()] = m
    return out


async def test_normal_send_is_pulled_by_a_4x_client(cluster):
    lines = run_client(cluster, "normal")
    receipts = [x["receipt"] for x in lines if "receipt" in x]
    assert [r["body"] for r in receipts] == ["normal-0", "normal-1", "normal-2"]
    msgs = await visible(cluster)
    for r in receipts:
        m = msgs[r["body"]]
        assert m.properties["UNIQ_KEY"] == r["message_id"]
        assert m.properties["TAGS"] == "TagA"
        assert set(m.properties["KEYS"].split(" ")) == {"k1", "k2"}
        assert m.properties["color"] == "red"
        assert m.properties["PGROUP"] == TOPIC


async def test_fifo_group_lands_in_one_queue_in_order(cluster):
    run_client(cluster, "fifo")
    msgs = await visible(cluster)
    fifo = [msgs[f"fifo-{i}"] for i in range(4)]
    assert len({m.queue_id for m in fifo}) == 1
    assert [m.queue_offset for m in fifo] == sorted(m.queue_offset for m in fifo)
    assert all(m.properties["__SHARDINGKEY"] == "order-1" for m in fifo)


async def test_delay_is_held_back_never_early(cluster):
    lines = run_client(cluster, "delay")
    receipts = [x["receipt"] for x in lines if "receipt" in x]
    assert [r["body"] for r in receipts] == ["delay-0"]
    assert "delay-0" not in await visible(cluster)
    deadline = time.monotonic() + 30
    while "delay-0" not in (msgs := await visible(cluster)):
        assert time.monotonic() < deadline, "the delayed message never arrived"
        await asyncio.sleep(0.2)
    m = msgs["delay-0"]
    deliver_ms = int(m.properties["TIMER_DELIVER_MS"])
    assert deliver_ms % 1000 == 0  # the client sends whole seconds
    # held back by the timer wheel (or, without it, the 4.x delay level at or above the time)
    assert m.store_timestamp >= deliver_ms
    assert m.properties["UNIQ_KEY"] == receipts[0]["message_id"]


async def test_transaction_commit_rollback_and_check_back(cluster):
    lines = run_client(cluster, "transaction", check_wait=30)
    receipts = {x["receipt"]["body"]: x["receipt"] for x in lines if "receipt" in x}
    assert set(receipts) == {"tx-commit", "tx-rollback", "tx-check"}
    assert all(r["transaction_id"] for r in receipts.values())
    checks = [x["check"] for x in lines if "check" in x]
    assert checks and checks[0]["body"] == "tx-check"
    assert checks[0]["message_id"] == receipts["tx-check"]["message_id"]
    msgs = await visible(cluster)
    assert "tx-commit" in msgs and "tx-check" in msgs and "tx-rollback" not in msgs


async def test_bad_input_gets_5x_statuses(cluster):
    lines = run_client(cluster, "bad")
    errors = [x["error"] for x in lines if "error" in x]
    assert errors and errors[0]["type"] == "BadRequestException"
    assert errors[0]["text"].startswith("40007")  # ILLEGAL_MESSAGE_PROPERTY_KEY
    async with grpc.aio.insecure_channel(f"127.0.0.1:{cluster.grpc_port}") as channel:
        stub = sgrpc.MessagingServiceStub(channel)
        md = (("x-mq-client-id", "probe"),)
        r = await stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="NoSuchTopic")),
                                  metadata=md)
        assert r.status.code == pb.TOPIC_NOT_FOUND
        r = await stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name=TOPIC)))
        assert r.status.code == pb.CLIENT_ID_REQUIRED
        r = await stub.SendMessage(spb.SendMessageRequest(), metadata=md)
        assert r.status.code == pb.MESSAGE_CORRUPTED
        raw = channel.unary_unary("/apache.rocketmq.v2.MessagingService/SendMessage")
        with pytest.raises(grpc.aio.AioRpcError) as bad:
            await raw(b"\xff\xff\xff", metadata=md)
        # grpcio names the decode failure UNKNOWN (grpc-java: INTERNAL), with the reason
        assert bad.value.code() == grpc.StatusCode.UNKNOWN
        assert "Wire format was corrupt" in bad.value.details()
        unknown = channel.unary_unary("/apache.rocketmq.v2.MessagingService/NoSuchRpc")
        with pytest.raises(grpc.aio.AioRpcError) as missing:
            await unknown(b"", metadata=md)
        assert missing.value.code() == grpc.StatusCode.UNIMPLEMENTED
        # the broker still serves
        r = await stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name=TOPIC)), metadata=md)
        assert r.status.code == pb.OK and len(r.message_queues) == 4
        assert all(q.broker.endpoints.addresses[0].port == cluster.grpc_port
                   for q in r.message_queues)


NODE_DIR = ROOT / "tests" / "rmq5" / "node"


def node_client() -> Path:
    """The Node client's directory, its modules installed from npm when missing."""
    if not (NODE_DIR / "node_modules" / "rocketmq-client-nodejs").exists():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                       cwd=NODE_DIR, check=True, timeout=600)
    return NODE_DIR


async def test_node_client_send_is_pulled_by_a_4x_client(cluster):
    cwd = node_client()
    done = subprocess.run(["node", "producer.js", f"127.0.0.1:{cluster.grpc_port}", TOPIC, "3"],
                          cwd=cwd, capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines[-1] == {"done": True}, lines
    receipts = [x["receipt"] for x in lines if "receipt" in x]
    assert [r["body"] for r in receipts] == ["node-0", "node-1", "node-2"]
    msgs = await visible(cluster)
    for i, r in enumerate(receipts):
        m = msgs[r["body"]]
        assert m.properties["UNIQ_KEY"] == r["message_id"]
        assert m.properties["TAGS"] == "TagN" and m.properties["KEYS"] == f"nk{i}"
        assert m.properties["lang"] == "node"


ACL_RULES = """\
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - TopicAcl=PUB|SUB
      - TopicSubOnly=SUB
  - accessKey: rocketmq2
    secretKey: 12345678
    admin: true
"""


async def test_acl_accepts_and_refuses_5x_clients(tmp_path):
    python = client_python()
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "plain_acl.yml").write_text(ACL_RULES)
    grpc_port = free_port()
    c = Cluster(tmp_path, f"grpcServerPort={grpc_port}\naclEnable=true\n")
    c.start_broker()
    c.grpc_port, c.python = grpc_port, python
    try:
        wait_port(grpc_port, timeout=20)
        c.client.register_rpc_hook(AclClientRPCHook(SessionCredentials("rocketmq2", "12345678")))
        for topic in ("TopicAcl", "TopicSubOnly"):
            r = await c.call(R.UPDATE_AND_CREATE_TOPIC, {
                "topic": topic, "defaultTopic": "TBW102", "readQueueNums": "4",
                "writeQueueNums": "4", "perm": "6", "topicFilterType": "SINGLE_TAG",
                "topicSysFlag": "0", "order": "false"})
            assert r.code == ResponseCode.SUCCESS, r.remark
        lines = run_client(c, "normal", topic="TopicAcl", account=("RocketMQ", "12345678"))
        assert len([x for x in lines if "receipt" in x]) == 3, lines
        lines = run_client(c, "normal", topic="TopicSubOnly", account=("RocketMQ", "12345678"))
        errors = [x["error"] for x in lines if "error" in x]
        assert len(errors) == 3 and errors[0]["type"] == "ForbiddenException", errors
        assert "permission for topic:TopicSubOnly" in errors[0]["text"], errors
        # a wrong secret: every RPC is refused, QueryRoute first (the client then has no route)
        lines = run_client(c, "normal", topic="TopicAcl", account=("RocketMQ", "wrong___"))
        errors = [x["error"] for x in lines if "error" in x]
        assert len(errors) == 3 and "failed to fetch topic:TopicAcl route" in errors[0]["text"]
        async with grpc.aio.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            stub = sgrpc.MessagingServiceStub(channel)
            when = "20261126T120000Z"
            for secret, code, text in (
                    ("wrong___", pb.UNAUTHORIZED, "Check signature failed for accessKey=RocketMQ"),
                    ("12345678", pb.OK, "OK")):
                sig = hmac.new(secret.encode(), when.encode(), hashlib.sha1).hexdigest()
                md = (("x-mq-client-id", "acl-probe"), ("x-mq-date-time", when),
                      ("authorization", f"MQv2-HMAC-SHA1 Credential=RocketMQ, "
                                        f"SignedHeaders=x-mq-date-time, Signature={sig}"))
                r = await stub.QueryRoute(spb.QueryRouteRequest(
                    topic=pb.Resource(name="TopicAcl")), metadata=md)
                assert (r.status.code, r.status.message) == (code, text)
    finally:
        c.broker.stop()
        await c.client.close()
        c.namesrv.kill()
