"""Master/slave failover with real clients: a SYNC_MASTER and its slave, the C++
push consumer and the rmq push consumer reading, the C++ producer sending when
the master is SIGKILLed.  Every SEND_OK message is on the slave (SYNC_MASTER
answers only once the slave has it), and both consumers go on reading from the
slave while the master is down, as 4.9.8's clients do against a 4.9.8 slave
(the route keeps the slave; a pull for the dead master goes to any broker of
the name).  The restarted master catches up with what the slave holds and the
slave follows it again."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from datetime import datetime

import pytest

from rmq.client import ClientConfig, ConsumeFromWhere, ConsumerConfig, ConsumeStatus, PushConsumer
from rmq.client.headers import PULL_FLAG_SUBSCRIPTION, pull_header, send_header_v2
from rmq.common.codes import RequestCode, ResponseCode
from rmq.testing.procs import RmqProcess, free_port
from tests.interop.harness import Cluster, CppRunner, PushGroup, assert_ok
from tests.interop.messages import body_lengths, text_message

# run once, as the whole interop suite: the slave's store paths run in both builds in test_ha*

TOPIC = "TopicFailover"


class Slave:
    """broker-a, brokerId 1, of the cluster's master."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.port = free_port(span=4) + 2
        home = cluster.tmp / "slave"
        home.mkdir()
        text = cluster.broker_conf().read_text()
        text = text.replace(f"listenPort={cluster.port}", f"listenPort={self.port}")
        text = text.replace(str(cluster.tmp / "store"), str(home / "store"))
        text = text.replace("brokerId=0", "brokerId=1").replace("brokerRole=SYNC_MASTER", "")
        conf = home / "broker.conf"
        conf.write_text(text + "brokerRole=SLAVE\n")
        self.proc = RmqProcess("rmq.broker.startup", ["-c", str(conf), "-n", cluster.namesrv_addr],
                               home / "slave.out", env={"ROCKETMQ_HOME": str(home)})
        self.proc.start(wait_for_port=self.port, timeout=40)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def max_phy_offset(self, addr: str) -> int:
        r = Cluster.request(addr, RequestCode.GET_BROKER_RUNTIME_INFO, {})
        assert r.code == ResponseCode.SUCCESS, r.remark
        return int(json.loads(bytes(r.body))["table"]["commitLogMaxOffset"])

    def wait_topic(self, topic: str, timeout: float = 30.0) -> None:
        """Until SlaveSynchronize has brought the topic's config over (the slave
        answers pulls of it)."""
        deadline = time.monotonic() + timeout
        pull = pull_header("cg_probe", topic, 0, 0, 1, PULL_FLAG_SUBSCRIPTION, 0, 0, "*", 0,
                           "TAG", "broker-a")
        while Cluster.request(self.addr, RequestCode.PULL_MESSAGE,
                              pull).code == ResponseCode.TOPIC_NOT_EXIST:
            assert time.monotonic() < deadline, f"{topic} never reached the slave"
            time.sleep(0.3)

    def wait_connected(self, timeout: float = 30.0) -> None:
        """Until the SYNC_MASTER answers SEND_OK again: its slave has reconnected
        (until then it stores and answers SLAVE_NOT_AVAILABLE, as 4.9.8 does)."""
        deadline = time.monotonic() + timeout
        while True:
            header = send_header_v2("pg_probe", "TopicProbe", "TBW102", 1, 0, 0,
                                    int(time.time() * 1000), 0, "WAIT\x01true", False,
                                    "broker-a")
            r = Cluster.request(self.cluster.broker_addr, RequestCode.SEND_MESSAGE_V2, header,
                                b"probe")
            if r.code == ResponseCode.SUCCESS:
                return
            assert r.code == ResponseCode.SLAVE_NOT_AVAILABLE, (r.code, r.remark)
            assert time.monotonic() < deadline, "the slave never reconnected"
            time.sleep(0.3)

    def wait_in_sync(self, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        while True:
            m = self.max_phy_offset(self.cluster.broker_addr)
            if self.max_phy_offset(self.addr) == m:
                return m
            assert time.monotonic() < deadline, "the slave did not catch up with the master"
            time.sleep(0.2)


class PyConsumer:
    """rmq.client's PushConsumer in a thread of its own: the keys it consumed."""

    def __init__(self, namesrv: str, group: str) -> None:
        self.keys: list[str] = []
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self.namesrv, self.group = namesrv, group
        self.thread = threading.Thread(target=self._main, daemon=True)
        self.thread.start()

    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e

    async def _run(self) -> None:
        def on_messages(msgs, _ctx):
            self.keys.extend(m.keys for m in msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(
            self.group, listener=on_messages,
            config=ConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET),
            client_config=ClientConfig(namesrv_addr=self.namesrv, instance_name="py-failover"))
        consumer.subscribe(TOPIC, "*")
        await consumer.start()
        try:
            while not self._stop.is_set():
                await asyncio.sleep(0.1)
        finally:
            await consumer.shutdown()

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(30)


def wait_keys(get, wanted: set[str], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not wanted <= set(get()):
        assert time.monotonic() < deadline, f"{what}: missing {sorted(wanted - set(get()))[:10]}"
        time.sleep(0.2)


@pytest.mark.timeout(300)
def test_consumers_read_from_the_slave_while_the_sync_master_is_down(cluster_factory, tmp_path):
    cluster = cluster_factory(extra="brokerRole=SYNC_MASTER\n")
    slave = Slave(cluster)
    cpp = CppRunner(tmp_path, cluster)
    py = None
    try:
        cluster.create_topic(TOPIC, queues=4)
        slave.wait_topic(TOPIC)
        before = [text_message(TOPIC, f"a-{i}") for i in range(12)]
        during = [text_message(TOPIC, f"d-{i}") for i in range(40)]
        after = [text_message(TOPIC, f"z-{i}") for i in range(12)]
        lengths = body_lengths(before + during + after)
        assert_ok(cpp.run({"op": "produce", "messages": before})["results"])
        group = PushGroup(cpp, "cg_failover", TOPIC, body_len=lengths, max_s=280)
        group.wait_members(1)
        py = PyConsumer(cluster.namesrv_addr, "cg_failover_py")
        cpp_keys = lambda: [r["keys"] for rs in group.received() for r in rs]  # noqa: E731
        wait_keys(cpp_keys, {m["keys"] for m in before}, "C++ consumer before the kill", 60)
        wait_keys(lambda: py.keys, {m["keys"] for m in before}, "rmq consumer before", 60)

        # the producer is sending (one message every 100 ms) when the master dies
        producer = cpp.spawn({"op": "produce", "messages": during, "pause_ms": 100,
                              "timeout_ms": 3000, "max_s": 200})
        deadline = time.monotonic() + 60
        while sum(cluster.max_offset(TOPIC, q) for q in range(4)) < len(before) + 8:
            assert time.monotonic() < deadline, "the producer never got going"
            time.sleep(0.1)
        began = datetime.now()
        cluster.broker.kill()
        killed_at = time.monotonic()
        sends = producer.finish(200)
        assert sends["ok"], sends
        acked = {m["keys"] for m, r in zip(during, sends["results"], strict=True)
                 if r["ok"] and r.get("status") == "OK"}
        assert acked, sends["results"][:12]
        wanted = {m["keys"] for m in before} | acked
        wait_keys(cpp_keys, wanted, "C++ consumer across the kill", 120)
        wait_keys(lambda: py.keys, wanted, "rmq consumer across the kill", 120)
        # groups that start while the master is down can only read from the slave
        late = PushGroup(cpp, "cg_failover_late", TOPIC, body_len=lengths, max_s=200)
        late_py = PyConsumer(cluster.namesrv_addr, "cg_failover_late_py")
        try:
            late_keys = lambda: [r["keys"] for rs in late.received() for r in rs]  # noqa: E731
            wait_keys(late_keys, wanted, "C++ consumer started after the kill", 120)
            cpp_at = time.monotonic() - killed_at
            wait_keys(lambda: late_py.keys, wanted, "rmq consumer started after the kill", 120)
            py_at = time.monotonic() - killed_at
        finally:
            late.stop()
            late_py.stop()
        print(f"SEND_OK before the kill: {len(acked)} of {len(during)}; new groups read all of "
              f"them from the slave {cpp_at:.1f} s (C++) / {py_at:.1f} s (rmq) after the kill")

        # the master comes back: it catches up, the slave follows, new messages flow
        cluster.start_broker()
        cluster.restarts.append((began, datetime.now()))
        slave.wait_connected()
        results = cpp.run({"op": "produce", "messages": after}, timeout=90)["results"]
        assert all(r["ok"] for r in results), [r.get("error", "")[:60] for r in results]
        wanted |= {m["keys"] for m in after}
        wait_keys(cpp_keys, wanted, "C++ consumer after the restart", 120)
        wait_keys(lambda: py.keys, wanted, "rmq consumer after the restart", 120)
        cluster.recovered()
        slave.wait_in_sync()
        assert py.error is None, py.error
        assert_ok(group.stop())
    finally:
        if py is not None:
            py.stop()
        cpp.close()
        slave.proc.kill()
