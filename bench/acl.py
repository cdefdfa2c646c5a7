"""What plain ACL costs per request: the client's signature (``AclClientRPCHook``)
and the broker's check (``PlainAccessValidator``: resources, account, HMAC-SHA1
over the extFields values and the body, permissions) of a SEND_MESSAGE_V2 with
the C++ client's 13 header fields, for a few body sizes.  With aclEnable=false
the broker runs no hook at all (one empty-list test per request).

``--broker`` measures the whole send instead: signed 1 KiB SEND_MESSAGE_V2
requests, ``--inflight`` at a time, into a broker with aclEnable=true, with
its send lane on (a send the ACL passed is served by the lane) and off (the
general path), alternated ``--rounds`` times: broker CPU µs per message.

    .venv/bin/python -m bench.acl [--count N]
    .venv/bin/python -m bench.acl --broker [--count N] [--inflight 16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from rmq.acl import AclClientRPCHook, SessionCredentials
from rmq.acl.validator import PlainAccessValidator
from rmq.common.codes import RequestCode
from rmq.remoting import RemotingCommand

V2_EXT = {"a": "please_rename_unique_group_name", "b": "BenchmarkTest", "c": "TBW102",
          "d": "4", "e": "3", "f": "0", "g": "1700000000000", "h": "0",
          "i": "UNIQ_KEY\x017F0000010B3C18B4AAC2A9F3E10000\x02WAIT\x01true\x02TAGS\x01TagA",
          "j": "0", "k": "false", "m": "false", "n": "broker-a"}
RULES = ("accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n"
         "    defaultTopicPerm: DENY\n    defaultGroupPerm: SUB\n"
         "    topicPerms: [BenchmarkTest=PUB|SUB]\n")


def measure(count: int, size: int, validator: PlainAccessValidator) -> tuple[float, float]:
    """(client µs, broker µs) per request, best of three rounds."""
    hook = AclClientRPCHook(SessionCredentials("RocketMQ", "12345678"))
    body = b"x" * size
    best_sign = best_check = float("inf")
    for _ in range(3):
        reqs = [RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, dict(V2_EXT), body)
                for _ in range(count)]
        t0 = time.perf_counter()
        for r in reqs:
            hook.do_before_request(None, r)
        t1 = time.perf_counter()
        for r in reqs:
            validator.do_before_request("127.0.0.1:40000", r)
        t2 = time.perf_counter()
        best_sign = min(best_sign, (t1 - t0) / count * 1e6)
        best_check = min(best_check, (t2 - t1) / count * 1e6)
    return best_sign, best_check


BROKER_TOPIC = "AclBench"
BROKER_RULES = RULES.replace("BenchmarkTest", BROKER_TOPIC) + (
    "  - accessKey: RocketAdmin\n    secretKey: 12345678\n    admin: true\n")


async def _signed_sends(addr: str, count: int, inflight: int) -> None:
    """``count`` signed sends of 1 KiB round 8 queues, ``inflight`` at a time."""
    from rmq.client.headers import send_header_v2
    from rmq.remoting import RemotingClient

    client = RemotingClient()
    client.register_rpc_hook(AclClientRPCHook(SessionCredentials("RocketMQ", "12345678")))
    body = b"x" * 1024
    todo = iter(range(count))

    async def worker() -> None:
        for n in todo:
            props = f"UNIQ_KEY\x01{uuid.uuid4().hex.upper()}\x02WAIT\x01true\x02"
            header = send_header_v2("bench_acl", BROKER_TOPIC, "TBW102", 8, n % 8, 0,
                                    int(time.time() * 1000), 0, props, False, "broker-bench")
            r = await client.invoke(addr, RemotingCommand.create_request(
                RequestCode.SEND_MESSAGE_V2, header, body), 10_000)
            if r.code != 0:
                raise RuntimeError(f"send refused: {r.code} {r.remark}")

    try:
        await asyncio.gather(*(worker() for _ in range(inflight)))
    finally:
        await client.close()


async def _create_topic(addr: str) -> None:
    from rmq.remoting import RemotingClient

    client = RemotingClient()
    client.register_rpc_hook(AclClientRPCHook(SessionCredentials("RocketAdmin", "12345678")))
    try:
        r = await client.invoke(addr, RemotingCommand.create_request(
            RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": BROKER_TOPIC, "defaultTopic": "TBW102", "readQueueNums": "8",
                "writeQueueNums": "8", "perm": "6", "topicFilterType": "SINGLE_TAG"}), 10_000)
        if r.code != 0:
            raise RuntimeError(f"topic not created: {r.code} {r.remark}")
    finally:
        await client.close()


def broker_round(lane: bool, count: int, inflight: int) -> float:
    """Broker CPU µs per signed send, lane on or off (a fresh broker)."""
    from bench.cluster import OUT_DIR, Cluster
    from bench.cpu import cpu_seconds

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="cluster-acl-", dir=OUT_DIR))
    (workdir / "conf").mkdir()
    (workdir / "conf" / "plain_acl.yml").write_text(BROKER_RULES)
    with Cluster(workdir=workdir, broker_conf={
            "aclEnable": "true", "rmqSendLaneEnable": "true" if lane else "false"}) as c:
        asyncio.run(_create_topic(c.broker_addr))
        asyncio.run(_signed_sends(c.broker_addr, min(count, 2000), inflight))  # warm-up
        cpu0 = cpu_seconds(c.broker_pid)
        asyncio.run(_signed_sends(c.broker_addr, count, inflight))
        return (cpu_seconds(c.broker_pid) - cpu0) / count * 1e6


def broker_main(count: int, inflight: int, rounds: int) -> None:
    got: dict[str, list[float]] = {"on": [], "off": []}
    for _ in range(rounds):
        for kind in ("off", "on"):
            got[kind].append(broker_round(kind == "on", count, inflight))
    print(f"signed 1 KiB sends, {inflight} in flight, {count} per round, aclEnable=true")
    print("| send lane | broker CPU µs/msg (rounds) | median |")
    print("|---|---|---|")
    for kind in ("off", "on"):
        runs = ", ".join(f"{v:.1f}" for v in got[kind])
        print(f"| {kind} | {runs} | {statistics.median(got[kind]):.1f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--broker", action="store_true",
                        help="signed sends through a broker, send lane on and off")
    parser.add_argument("--inflight", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.broker:
        broker_main(args.count, args.inflight, args.rounds)
        return 0
    with tempfile.TemporaryDirectory() as home:
        (Path(home) / "conf").mkdir()
        (Path(home) / "conf" / "plain_acl.yml").write_text(RULES)
        validator = PlainAccessValidator(home)
        print("| body | client sign µs/req | broker check µs/req |")
        print("|---|---|---|")
        for size in (0, 1024, 4096, 65536):
            sign, check = measure(args.count, size, validator)
            print(f"| {size} B | {sign:.2f} | {check:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
