"""Soak of brokers on a DLedger group (``make soak``): a name server and three
rmq-broker processes of one broker name, every DLedger link between them
through a TCP proxy in the test; the rmq client sends without pause while
``RMQ_DLEDGER_BROKER_SOAK_ROUNDS`` (default 20) random faults hit the master:
SIGKILL and restart, or its DLedger links cut and healed.  After each fault a
new master must register and take sends.  At the end every SEND_OK message is
consumed, and the three stores hold the same entries and the same messages
per queue.  Prints how long after each fault the new master registered and
when the producer's first SEND_OK from it came (the client finds the new
master with its route refresh, every 30 s by default, as 4.9.8 clients do)."""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import time

import pytest

from rmq.client import Message, Producer
from rmq.client.admin import MQAdmin
from rmq.client.exceptions import MQClientError
from rmq.common.message_id import decode_message_id
from rmq.remoting.exceptions import RemotingError
from rmq.store.inspect import inspect_store
from rmq.testing.cluster import Cluster, broker_conf, start_namesrv
from rmq.testing.procs import RmqProcess, free_port
from rmq.testing.tcp_proxy import TcpProxy
from tests.integration.admin_cli import recording_consumer

pytestmark = [pytest.mark.soak, pytest.mark.timeout(3600)]

ROUNDS = int(os.environ.get("RMQ_DLEDGER_BROKER_SOAK_ROUNDS", "20"))
IDS = ("n0", "n1", "n2")
NAME = "RaftSoak"


def _spread(values: list[float]) -> str:
    values = sorted(values)
    return (f"median {statistics.median(values):.1f} s, "
            f"p99 {values[min(len(values) - 1, int(len(values) * 0.99))]:.1f} s")


def taken_by_another(ack_times: list[tuple[float, int]], since: float, port: int) -> list[float]:
    """When SEND_OK answers came from a broker other than ``port`` after ``since``."""
    return [t for t, by in ack_times[-5000:] if t > since and by != port]


async def test_master_kills_and_partitions_under_sends(tmp_path):
    rng = random.Random(int(os.environ.get("RMQ_DLEDGER_SOAK_SEED", "1")))
    ns_port = free_port()
    namesrv = start_namesrv(tmp_path, ns_port)
    ports = {i: free_port(span=4) + 2 for i in IDS}
    raft = {i: free_port() for i in IDS}
    links = {(a, b): await TcpProxy(raft[b]).start() for a in IDS for b in IDS if a != b}
    confs = {}
    for node in IDS:
        peers = ";".join(f"{p}-127.0.0.1:{raft[p] if p == node else links[(node, p)].port}"
                         for p in IDS)
        confs[node] = broker_conf(tmp_path, ports[node],
                                  f"enableDLegerCommitLog=true\ndLegerGroup={NAME}\n"
                                  f"dLegerPeers={peers}\ndLegerSelfId={node}\n",
                                  name=NAME, store=f"store-{node}")
    procs: dict[str, RmqProcess] = {}

    def start(node: str) -> None:
        procs[node] = RmqProcess("rmq.broker.startup",
                                 ["-c", confs[node], "-n", f"127.0.0.1:{ns_port}"],
                                 tmp_path / f"broker-{node}.out",
                                 env={"ROCKETMQ_HOME": str(tmp_path)}).start(
                                     wait_for_port=ports[node])

    def isolate(node: str, cut: bool) -> None:
        for (a, b), link in links.items():
            if node in (a, b):
                link.cut() if cut else link.heal()

    admin = MQAdmin(f"127.0.0.1:{ns_port}")

    async def master(exclude: str | None = None) -> str:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                addr = (await admin.cluster_info()).brokerAddrTable[NAME].brokerAddrs.get(0)
            except (MQClientError, RemotingError, KeyError, OSError):
                addr = None
            for node, port in ports.items():
                if addr == f"127.0.0.1:{port}" and node != exclude:
                    return node
            await asyncio.sleep(0.2)
        raise AssertionError("no master registered")

    c = Cluster.__new__(Cluster)
    c.ns_port = ns_port
    acked: list[str] = []
    ack_times: list[tuple[float, int]] = []  # (when, the storing broker's port)
    stop = asyncio.Event()

    async def sender(producer: Producer) -> None:
        n = 0
        while not stop.is_set():
            try:
                r = await producer.send(Message("SoakTopic", f"m{n}".encode() * 20))
            except MQClientError:
                await asyncio.sleep(0.2)
                continue
            finally:
                n += 1
            acked.append(r.msg_id)
            ack_times.append((time.monotonic(), decode_message_id(r.offset_msg_id)[0][1]))

    failovers: list[float] = []
    registered: list[float] = []
    try:
        for node in IDS:
            start(node)
        first = await master()
        await admin.create_topic(f"127.0.0.1:{ports[first]}", "SoakTopic", 4, 4)
        async with Producer("pgSoak", client_config=c.client_config("soak-p")) as p:
            task = asyncio.ensure_future(sender(p))
            await asyncio.sleep(3)
            for _ in range(ROUNDS):
                victim = await master()
                kind = rng.choice(("kill", "cut"))
                fault_at = time.monotonic()
                if kind == "kill":
                    procs[victim].kill()
                else:
                    isolate(victim, True)
                await master(exclude=victim)
                registered.append(time.monotonic() - fault_at)
                while not taken_by_another(ack_times, fault_at, ports[victim]) and \
                        time.monotonic() - fault_at < 90:
                    await asyncio.sleep(0.1)
                after = taken_by_another(ack_times, fault_at, ports[victim])
                assert after, "no send taken by a new master after the fault"
                failovers.append(after[0] - fault_at)
                if kind == "kill":
                    start(victim)
                else:
                    isolate(victim, False)
                await asyncio.sleep(rng.uniform(2.0, 5.0))
            stop.set()
            await task
        deadline = time.monotonic() + 120
        async with recording_consumer(c, "cgSoak", "SoakTopic", "*", 0) as (_, received):
            while {m.msg_id for m in received} < set(acked):
                assert time.monotonic() < deadline, \
                    f"{len(set(acked) - {m.msg_id for m in received})} SEND_OK messages missing"
                await asyncio.sleep(0.5)
        await asyncio.sleep(5)  # the last commits reach every node
        reports = [inspect_store(str(tmp_path / f"store-{n}")) for n in IDS]
        ends = {r.dledger["endIndex"] for r in reports}
        queues = [{k: (q["messages"], q["last"]) for k, q in r.queues.items()} for r in reports]
        assert len(ends) == 1 and all(q == queues[0] for q in queues), (ends, queues)
        print(f"\nDLedger broker soak: {ROUNDS} faults, {len(acked)} SEND_OK; new master "
              f"registered after {_spread(registered)}; first SEND_OK from it after "
              f"{_spread(failovers)}")
    finally:
        stop.set()
        await admin.close()
        for proc in procs.values():
            proc.kill()
        namesrv.kill()
        for link in links.values():
            await link.close()
