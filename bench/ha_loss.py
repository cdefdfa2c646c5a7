"""The loss window of ASYNC_MASTER replication: what a master SIGKILLed under
load had acknowledged (SEND_OK) that its slave never received.

Each round starts a name server, an ASYNC_MASTER and its slave (brokerId 1)
on free loopback ports, sends 1 KiB messages with ``--inflight`` requests in
flight (optionally capped at ``--rate`` msgs/s) through ``rmq.client``, kills
the master with SIGKILL after a random 2-4 s, then reads every queue back
from the slave.  Reported per round and in total: messages acknowledged,
acknowledged but missing on the slave, how old the oldest missing
acknowledgement was when the master died (the window: everything acknowledged
later than that may be lost), and how many bytes the slave was behind.
SYNC_MASTER has no such window (tests/interop/test_cpp_failover.py).

    .venv/bin/python -m bench.ha_loss [--rounds 5] [--inflight 64] [--rate 0] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path

from bench.cluster import create_topic
from bench.modes import mode_env
from bench.stats import percentile
from rmq.client import ClientConfig, Message, Producer, ProducerConfig
from rmq.client.codec import decode_messages
from rmq.client.headers import PULL_FLAG_SUBSCRIPTION, pull_header
from rmq.common import fastjson
from rmq.common.codes import RequestCode, ResponseCode
from rmq.remoting import RemotingClient, RemotingCommand
from rmq.testing.procs import RmqProcess, free_port

TOPIC = "HaLossTopic"
QUEUES = 8
BODY = 1024


class Pair:
    """Name server, ASYNC_MASTER and SLAVE of broker-ha under ``work``."""

    def __init__(self, work: Path, mode: str) -> None:
        self.work = work
        self.env = mode_env(mode)
        self.ns_port = free_port()
        conf = work / "namesrv.conf"
        conf.write_text(f"listenPort={self.ns_port}\nkvConfigPath={work}/kv.json\n")
        self.namesrv = RmqProcess("rmq.namesrv.startup", ["-c", str(conf)], work / "ns.out",
                                  env=dict(self.env, ROCKETMQ_HOME=str(work)))
        self.namesrv.start(wait_for_port=self.ns_port)
        self.mport = free_port(span=4) + 2
        self.sport = free_port(span=4) + 2
        self.master = self._broker("master", self.mport, "brokerId=0\nbrokerRole=ASYNC_MASTER\n")
        self.slave = self._broker("slave", self.sport, "brokerId=1\nbrokerRole=SLAVE\n")
        self.client = RemotingClient()

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.ns_port}"

    def _broker(self, name: str, port: int, extra: str) -> RmqProcess:
        home = self.work / name
        home.mkdir()
        conf = home / "broker.conf"
        conf.write_text(f"brokerName=broker-ha\nlistenPort={port}\nbrokerIP1=127.0.0.1\n"
                        f"brokerIP2=127.0.0.1\nstorePathRootDir={home / 'store'}\n{extra}")
        proc = RmqProcess("rmq.broker.startup", ["-c", str(conf), "-n", self.namesrv_addr],
                          home / "broker.out", env=dict(self.env, ROCKETMQ_HOME=str(home)))
        proc.start(wait_for_port=port, timeout=60)
        return proc

    async def call(self, port: int, code: int, header=None) -> RemotingCommand:
        return await self.client.invoke(f"127.0.0.1:{port}",
                                        RemotingCommand.create_request(code, header), 5000)

    async def max_offset(self, port: int) -> int:
        r = await self.call(port, RequestCode.GET_BROKER_RUNTIME_INFO)
        return int(fastjson.loads(bytes(r.body))["table"]["commitLogMaxOffset"])

    async def wait_replicating(self, timeout: float = 60.0) -> None:
        """Until the slave holds the topic and has copied everything so far."""
        deadline = time.monotonic() + timeout
        while True:
            r = await self.call(self.sport, RequestCode.PULL_MESSAGE, self._pull(0, 0, 1))
            m = await self.max_offset(self.mport)
            if r.code != ResponseCode.TOPIC_NOT_EXIST and m > 0 and \
                    await self.max_offset(self.sport) == m:
                return
            if time.monotonic() > deadline:
                raise RuntimeError("the slave never caught up with the master")
            await asyncio.sleep(0.2)

    @staticmethod
    def _pull(queue: int, offset: int, nums: int = 32) -> dict[str, str]:
        return pull_header("ha_loss_reader", TOPIC, queue, offset, nums, PULL_FLAG_SUBSCRIPTION,
                           0, 0, "*", 0, "TAG", "broker-ha")

    async def slave_keys(self) -> set[str]:
        keys: set[str] = set()
        for q in range(QUEUES):
            offset = 0
            while True:
                r = await self.call(self.sport, RequestCode.PULL_MESSAGE, self._pull(q, offset))
                if r.code != ResponseCode.SUCCESS:
                    break
                keys.update(m.keys for m in decode_messages(r.body))
                offset = int(r.ext_fields["nextBeginOffset"])
        return keys

    async def close(self) -> None:
        await self.client.close()
        for p in (self.slave, self.master, self.namesrv):
            p.kill()


async def one_round(mode: str, inflight: int, rate: float, seed: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="ha-loss-") as tmp:
        pair = Pair(Path(tmp), mode)
        try:
            await create_topic(f"127.0.0.1:{pair.mport}", pair.namesrv_addr, TOPIC, QUEUES)
            producer = Producer("ha_loss_pg", config=ProducerConfig(send_msg_timeout=3000,
                                                                     retry_times_when_send_failed=0),
                                client_config=ClientConfig(namesrv_addr=pair.namesrv_addr))
            await producer.start()
            await producer.send(Message(TOPIC, b"warm-up", keys="warm-up"))
            await pair.wait_replicating()
            acked: dict[str, float] = {}
            body = os.urandom(BODY)
            stop = asyncio.Event()
            counter = iter(range(1 << 62))
            interval = inflight / rate if rate > 0 else 0.0

            async def lane() -> None:
                while not stop.is_set():
                    key = f"k{next(counter)}"
                    began = time.monotonic()
                    try:
                        await producer.send(Message(TOPIC, body, keys=key))
                        acked[key] = time.monotonic()
                    except Exception:  # noqa: BLE001 - the master is gone
                        await asyncio.sleep(0.05)
                    if interval:
                        await asyncio.sleep(max(0.0, interval - (time.monotonic() - began)))

            lanes = [asyncio.create_task(lane()) for _ in range(inflight)]
            await asyncio.sleep(random.Random(seed).uniform(2.0, 4.0))
            master_at_kill = await pair.max_offset(pair.mport)
            os.kill(pair.master.pid, signal.SIGKILL)
            killed = time.monotonic()
            await asyncio.sleep(1.0)
            stop.set()
            await asyncio.gather(*lanes, return_exceptions=True)
            await producer.shutdown()
            await asyncio.sleep(1.0)
            on_slave = await pair.slave_keys()
            acked_before = {k: t for k, t in acked.items() if t <= killed}
            lost = [k for k in acked_before if k not in on_slave]
            window_ms = max((killed - acked_before[k]) * 1000 for k in lost) if lost else 0.0
            slave_max = await pair.max_offset(pair.sport)
            return {"acked": len(acked_before), "lost": len(lost), "window_ms": window_ms,
                    "behind_bytes": max(0, master_at_kill - slave_max),
                    "send_rate": len(acked_before) / max(1e-9, killed - min(acked.values()))}
        finally:
            await pair.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--inflight", type=int, default=64)
    ap.add_argument("--rate", type=float, default=0.0, help="msgs/s cap (0: as fast as it goes)")
    ap.add_argument("--mode", choices=("compiled", "twin"), default="compiled")
    ap.add_argument("--json", type=Path, help="write the rounds and totals here")
    args = ap.parse_args(argv)
    rounds = []
    for i in range(args.rounds):
        r = asyncio.run(one_round(args.mode, args.inflight, args.rate, seed=i))
        rounds.append(r)
        print(f"round {i + 1}: {r['send_rate']:,.0f} msgs/s, {r['acked']:,} SEND_OK before the "
              f"kill, {r['lost']} not on the slave, window {r['window_ms']:.1f} ms, slave "
              f"{r['behind_bytes']:,} bytes behind at the kill", flush=True)
    windows = sorted(r["window_ms"] for r in rounds)
    total = {"acked": sum(r["acked"] for r in rounds), "lost": sum(r["lost"] for r in rounds),
             "window_ms_median": percentile(windows, 50), "window_ms_max": windows[-1]}
    print(f"total: {total['lost']} of {total['acked']:,} acknowledged messages lost; loss window "
          f"median {total['window_ms_median']:.1f} ms, max {total['window_ms_max']:.1f} ms")
    if args.json:
        args.json.write_text(json.dumps({"rounds": rounds, "total": total}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
