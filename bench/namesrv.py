"""Name-server benchmark: route lookups per second and REGISTER_BROKER cost.

Starts a real ``rmq-namesrv`` on a free loopback port, registers 4 brokers
sharing 1,000 topics, then drives GET_ROUTEINFO_BY_TOPIC (version 409, standard
JSON) from one client with ``--inflight`` requests outstanding for
``--duration`` seconds (route_server_cpu_us: the name server's CPU per
lookup); then times REGISTER_BROKER of one broker with 10,000 topics: the
first one (every topic new) and then ``--rounds`` more with plain and with
compressed bodies (a new DataVersion every time, so the topic data is
decoded and applied again).  It runs once with the compiled extensions and once with
the pure-Python twins (a subprocess with RMQ_NO_EXTENSIONS=1, both the name
server and the client), and prints both with the compiled/twin ratio.

    .venv/bin/python -m bench.namesrv [--duration 5] [--inflight 64] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

from bench.modes import ROOT
from rmq.common.codes import RequestCode, ResponseCode
from rmq.common.data_version import DataVersion
from rmq.common.topic_config import (
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
)
from rmq.remoting import RemotingClient, RemotingCommand
from rmq.testing.procs import RmqProcess, free_port

BROKERS = 4
ROUTE_TOPICS = 1000
REGISTER_TOPICS = 10_000


def register_request(name: str, addr: str, topics: list[str], counter: int,
                     compressed: bool) -> RemotingCommand:
    table = {t: TopicConfig(t, 8, 8, 6) for t in topics}
    body = RegisterBrokerBody(TopicConfigSerializeWrapper(
        table, DataVersion(int(time.time() * 1000), counter))).encode(compressed)
    header = {"brokerName": name, "brokerAddr": addr, "clusterName": "BenchCluster",
              "haServerAddr": addr, "brokerId": "0",
              "compressed": "true" if compressed else "false",
              "bodyCrc32": str(zlib.crc32(body) & 0x7FFFFFFF)}
    return RemotingCommand.create_request(RequestCode.REGISTER_BROKER, header, body)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of process ``pid`` so far."""
    import psutil

    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


async def route_load(addr: str, duration: float, inflight: int, server_pid: int) -> dict:
    client = RemotingClient()
    topics = [f"BenchTopic{i}" for i in range(ROUTE_TOPICS)]
    for b in range(BROKERS):
        resp = await client.invoke(addr, register_request(
            f"broker-{b}", f"127.0.0.{b + 1}:10911", topics, 1, False), 10_000)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    count = 0
    failures = 0
    latencies: list[float] = []
    deadline = time.perf_counter() + duration

    async def worker(seed: int) -> None:
        nonlocal count, failures
        i = seed
        while time.perf_counter() < deadline:
            req = RemotingCommand.create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                 {"topic": topics[i % ROUTE_TOPICS]})
            t0 = time.perf_counter()
            resp = await client.invoke(addr, req, 5000)
            latencies.append(time.perf_counter() - t0)
            if resp.code == ResponseCode.SUCCESS:
                count += 1
            else:
                failures += 1
            i += inflight

    start, cpu = time.perf_counter(), _cpu_seconds(server_pid)
    await asyncio.gather(*(worker(s) for s in range(inflight)))
    elapsed, cpu = time.perf_counter() - start, _cpu_seconds(server_pid) - cpu
    await client.close()
    latencies.sort()
    return {"route_rps": count / elapsed, "route_failures": failures,
            "route_server_cpu_us": 1e6 * cpu / max(1, count + failures),
            "route_avg_ms": 1000 * sum(latencies) / max(1, len(latencies)),
            "route_p99_ms": 1000 * latencies[int(len(latencies) * 0.99) - 1] if latencies else 0}


async def register_cost(addr: str, rounds: int) -> dict:
    client = RemotingClient()
    topics = [f"RegTopic{i}" for i in range(REGISTER_TOPICS)]
    # the first registration creates 10,000 topics (and logs each one, as Java does)
    t0 = time.perf_counter()
    resp = await client.invoke(addr, register_request("broker-big", "127.0.0.9:10911", topics,
                                                      99, False), 30_000)
    out = {"register_first_ms": 1000 * (time.perf_counter() - t0)}
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    for compressed in (False, True):
        times = []
        for r in range(rounds):
            req = register_request("broker-big", "127.0.0.9:10911", topics, 100 + r, compressed)
            t0 = time.perf_counter()
            resp = await client.invoke(addr, req, 30_000)
            times.append(time.perf_counter() - t0)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
        key = "register_compressed_ms" if compressed else "register_plain_ms"
        out[key] = 1000 * sum(times) / len(times)
    await client.close()
    return out


def worker(args) -> dict:
    """One mode: start the name server (inheriting this environment) and measure."""
    port = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        conf = Path(tmp) / "namesrv.conf"
        conf.write_text(f"listenPort={port}\nbindAddress=127.0.0.1\n"
                        f"kvConfigPath={tmp}/kv.json\nlogDir={tmp}/logs\n")
        proc = RmqProcess("rmq.namesrv.startup", ["-c", str(conf)], Path(tmp) / "out.log")
        proc.start(wait_for_port=port)
        try:
            import uvloop
            addr = f"127.0.0.1:{port}"
            result = uvloop.run(route_load(addr, args.duration, args.inflight, proc.pid))
            result.update(uvloop.run(register_cost(addr, args.rounds)))
        finally:
            proc.stop()
    from rmq._fast import compiled
    result["compiled"] = compiled("remoting_codec") is not None
    return result


def run_mode(args, twins: bool) -> dict:
    env = dict(os.environ)
    env.pop("RMQ_REQUIRE_EXTENSIONS", None)
    if twins:
        env["RMQ_NO_EXTENSIONS"] = "1"
    else:
        env.pop("RMQ_NO_EXTENSIONS", None)
    cmd = [sys.executable, "-m", "bench.namesrv", "--worker", "--duration", str(args.duration),
           "--inflight", str(args.inflight), "--rounds", str(args.rounds)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"benchmark worker failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--inflight", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args)))
        return 0
    compiled = run_mode(args, twins=False)
    twins = run_mode(args, twins=True)
    if args.json:
        print(json.dumps({"compiled": compiled, "twins": twins}))
        return 0
    print(f"name server: {BROKERS} brokers x {ROUTE_TOPICS} topics, {args.inflight} in flight, "
          f"{args.duration:g} s; REGISTER_BROKER with {REGISTER_TOPICS} topics x {args.rounds}")
    print(f"{'figure':28} {'compiled':>12} {'twins':>12} {'ratio':>7}")
    if not compiled.get("compiled"):
        print("(compiled extensions not built: run `make ext`; both columns are twins)")
    for key in ("route_rps", "route_server_cpu_us", "route_avg_ms", "route_p99_ms",
                "route_failures",
                "register_first_ms", "register_plain_ms", "register_compressed_ms"):
        c, t = compiled[key], twins[key]
        ratio = (c / t if key == "route_rps" else t / c) if c and t else 0.0
        print(f"{key:28} {c:12.2f} {t:12.2f} {ratio:6.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
