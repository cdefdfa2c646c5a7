"""Brokers on a DLedger commit log (``enableDLegerCommitLog=true``): three real
rmq-broker processes of one broker name form a group with a name server; the
leader registers as master (brokerId 0), the others as slaves (selfId + 1).
The rmq client sends and consumes through them; SIGKILL of the master under
load: a new master registers within seconds, sends go on, every SEND_OK
message is consumed, and the restarted node rejoins as a slave with the same
log.  Bad DLedger settings stop a broker with one line."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
import pytest_asyncio

from rmq.client import Message, Producer
from rmq.client.admin import MQAdmin
from rmq.client.exceptions import MQClientError
from rmq.common.properties import load_properties
from rmq.store.inspect import inspect_store
from rmq.testing.cluster import Cluster, broker_conf, start_namesrv
from rmq.testing.procs import RmqProcess, free_port, run_cli
from tests.integration.admin_cli import recording_consumer

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(240)]

IDS = ("n0", "n1", "n2")
NAME = "RaftNode00"


class DLedgerBrokers:
    def __init__(self, tmp) -> None:
        self.tmp = tmp
        self.ns_port = free_port()
        self.namesrv = start_namesrv(tmp, self.ns_port)
        self.ports = {i: free_port(span=4) + 2 for i in IDS}
        self.raft = {i: free_port() for i in IDS}
        peers = ";".join(f"{i}-127.0.0.1:{self.raft[i]}" for i in IDS)
        self.confs = {i: broker_conf(tmp, self.ports[i],
                                     "brokerClusterName=RaftCluster\nenableDLegerCommitLog=true\n"
                                     f"dLegerGroup={NAME}\ndLegerPeers={peers}\ndLegerSelfId={i}\n"
                                     "sendMessageThreadPoolNums=4\n", name=NAME, store=f"store-{i}")
                      for i in IDS}
        self.procs: dict[str, RmqProcess] = {}
        self.admin = MQAdmin(self.namesrv_addr)

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.ns_port}"

    def start(self, node: str) -> None:
        self.procs[node] = RmqProcess(
            "rmq.broker.startup", ["-c", self.confs[node], "-n", self.namesrv_addr],
            self.tmp / f"broker-{node}.out", env={"ROCKETMQ_HOME": str(self.tmp)},
        ).start(wait_for_port=self.ports[node])

    async def master(self, exclude: str | None = None, timeout: float = 30.0) -> str:
        """The node registered as brokerId 0."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                info = await self.admin.cluster_info()
                addr = info.brokerAddrTable[NAME].brokerAddrs.get(0)
            except (MQClientError, KeyError, OSError):
                addr = None
            for node, port in self.ports.items():
                if addr == f"127.0.0.1:{port}" and node != exclude:
                    return node
            await asyncio.sleep(0.2)
        raise AssertionError("no master registered")

    async def close(self) -> None:
        await self.admin.close()
        for p in self.procs.values():
            p.kill()
        self.namesrv.kill()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def brokers(tmp_path_factory):
    b = DLedgerBrokers(tmp_path_factory.mktemp("dledger-brokers"))
    try:
        for node in IDS:
            b.start(node)
        yield b
    finally:
        await b.close()


def _cluster_view(b: DLedgerBrokers) -> Cluster:
    """A Cluster-like handle for the client helpers (name server only)."""
    c = Cluster.__new__(Cluster)
    c.ns_port = b.ns_port
    return c


async def test_leader_is_master_and_master_failover(brokers):
    first = await brokers.master()
    await brokers.admin.create_topic(f"127.0.0.1:{brokers.ports[first]}", "RaftTopic", 4, 4)
    deadline = time.monotonic() + 30
    while True:  # the last broker started may register after the master
        info = await brokers.admin.cluster_info()
        ids = sorted(info.brokerAddrTable[NAME].brokerAddrs)
        if len(ids) == 3 or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    assert ids[0] == 0 and len(ids) == 3 and all(i in (0, 1, 2, 3) for i in ids), ids
    c = _cluster_view(brokers)
    acked: list[str] = []
    async with Producer("pgRaft", client_config=c.client_config("raft-p")) as p:
        for i in range(60):
            r = await p.send(Message("RaftTopic", f"before {i}".encode()))
            acked.append(r.msg_id)
        brokers.procs[first].kill()
        killed = time.monotonic()
        second = await brokers.master(exclude=first)
        failover = time.monotonic() - killed
        assert failover < 20, failover
        deadline = time.monotonic() + 60
        sent_after = 0
        while sent_after < 60:
            try:
                r = await p.send(Message("RaftTopic", f"after {sent_after}".encode()))
            except MQClientError:
                assert time.monotonic() < deadline, "sends never resumed"
                await asyncio.sleep(0.5)
                continue
            acked.append(r.msg_id)
            sent_after += 1
    async with recording_consumer(c, "cgRaft", "RaftTopic", "*", len(acked)) as (_, received):
        got = {m.msg_id for m in received}
    assert set(acked) <= got, len(set(acked) - got)
    brokers.start(first)  # back as a slave, with the same committed log
    deadline = time.monotonic() + 60
    while True:
        info = await brokers.admin.cluster_info()
        addrs = info.brokerAddrTable[NAME].brokerAddrs
        if f"127.0.0.1:{brokers.ports[first]}" in addrs.values() and \
                addrs.get(0) == f"127.0.0.1:{brokers.ports[second]}":
            break
        assert time.monotonic() < deadline, addrs
        await asyncio.sleep(0.5)
    print(f"master failover after SIGKILL: {failover:.1f} s")


async def test_bad_dledger_settings_stop_the_broker(tmp_path):
    conf = broker_conf(tmp_path, free_port(span=4) + 2,
                       "enableDLegerCommitLog=true\ndLegerGroup=g\ndLegerSelfId=n5\n"
                       "dLegerPeers=n0-127.0.0.1:40911;n1-127.0.0.1:40912\n")
    out = run_cli("rmq.broker.startup", ["-c", conf], env={"ROCKETMQ_HOME": str(tmp_path)})
    assert out.returncode != 0
    assert "dLegerSelfId n5 is not in dLegerPeers" in out.stdout + out.stderr
    store = tmp_path / "store"
    assert not store.exists() or not any(store.iterdir())


async def test_inspector_reads_a_broker_dledger_store(brokers):
    report = inspect_store(str(brokers.tmp / "store-n1"))
    assert report.dledger is not None and report.dledger["entries"] > 0
    assert not [e for e in report.errors if "DLedger" in e], report.errors


async def test_the_shipped_group_is_consistent():
    """conf/dledger: one broker name and peer list, distinct ids and ports, and
    each file passes the broker's own checks (``-p`` prints it)."""
    root = Path(__file__).resolve().parents[2] / "conf" / "dledger"
    props = {}
    for node in IDS:
        path = root / f"broker-{node}.conf"
        props[node] = load_properties(path)
        out = run_cli("rmq.broker.startup", ["-c", str(path), "-p"],
                      env={"ROCKETMQ_HOME": str(root)})
        assert out.returncode == 0, out.stderr
    assert len({p["dLegerPeers"] for p in props.values()}) == 1
    assert len({p["brokerName"] for p in props.values()}) == 1
    assert [p["dLegerSelfId"] for p in props.values()] == list(IDS)
    assert len({p["listenPort"] for p in props.values()}) == 3


async def test_a_store_of_the_other_mode_is_refused(tmp_path):
    port = free_port(span=4) + 2
    plain = broker_conf(tmp_path, port, store="plain")
    (tmp_path / "plain" / "commitlog").mkdir(parents=True)
    (tmp_path / "plain" / "commitlog" / ("0" * 20)).write_bytes(b"\0" * 16)
    raft = broker_conf(tmp_path, port, "enableDLegerCommitLog=true\ndLegerGroup=g\n"
                       "dLegerSelfId=n0\ndLegerPeers=n0-127.0.0.1:40911\n", store="plain")
    out = run_cli("rmq.broker.startup", ["-c", raft], env={"ROCKETMQ_HOME": str(tmp_path)})
    assert out.returncode != 0 and "holds a commit log written without DLedger" in \
        out.stdout + out.stderr
    (tmp_path / "raft" / "dledger-n0" / "data").mkdir(parents=True)
    plain = broker_conf(tmp_path, port, store="raft")
    out = run_cli("rmq.broker.startup", ["-c", plain], env={"ROCKETMQ_HOME": str(tmp_path)})
    assert out.returncode != 0 and "holds a DLedger commit log" in out.stdout + out.stderr
    assert (tmp_path / "plain" / "commitlog" / ("0" * 20)).read_bytes() == b"\0" * 16


async def test_an_unreachable_quorum_stops_the_start(tmp_path):
    port = free_port(span=4) + 2
    dead = [free_port(), free_port()]
    conf = broker_conf(tmp_path, port, "enableDLegerCommitLog=true\ndLegerGroup=g\n"
                       f"dLegerSelfId=n0\ndLegerPeers=n0-127.0.0.1:{free_port()};"
                       f"n1-127.0.0.1:{dead[0]};n2-127.0.0.1:{dead[1]}\n")
    out = run_cli("rmq.broker.startup", ["-c", conf], timeout=60,
                  env={"ROCKETMQ_HOME": str(tmp_path), "RMQ_DLEDGER_QUORUM_WAIT_S": "3"})
    assert out.returncode != 0
    assert "broker start failed: DLedger group g: no leader within 3 s, a quorum of " \
        "n0-127.0.0.1:" in out.stderr
