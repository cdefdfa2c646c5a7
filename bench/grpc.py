"""gRPC endpoint benchmark: SendMessage and ReceiveMessage + AckMessage msgs/s
and the broker's CPU per message, beside the remoting path for the same work.

Starts its own name server and broker (compiled; ``--twin`` for the
pure-Python twins) and runs, each on its own topic, ``--messages`` messages of
``--size`` bytes with ``--inflight`` concurrent callers:

* remoting send: SEND_MESSAGE_V2, one message per request (a 4.x producer);
* gRPC send: SendMessage, one message per call (what every 5.x SDK sends);
* remoting receive+ack: POP_MESSAGE of 32 then one ACK_MESSAGE per message
  (the requests the gRPC endpoint makes, minus gRPC);
* gRPC receive+ack: ReceiveMessage of 32 then one AckMessage per message (what
  the 5.x SimpleConsumer does).

The gRPC callers are grpcio asyncio stubs of ``rmq.proxy.v2`` in this process
(the official Python client puts the same calls on the wire, with far more
client CPU of its own); each opens its Telemetry stream first, as the SDKs do.
``--official`` adds the same send and receive+ack through Apache's official
Python client 5.1.2 (``bench.grpc_official`` run in ``.venv-rmq5``,
``make rmq5-client``; threads calling its blocking API), whose broker CPU
covers its start-up handshake too.
``--tls-mode`` sets the broker's ``tls.server.mode`` (``permissive``, the
default, pipes the gRPC port through the first-byte splitter of
``rmq.proxy.tls``; ``disabled`` lets grpcio own the port).

    .venv/bin/python -m bench.grpc [--messages 20000] [--size 256] [--inflight 16]
        [--tls-mode permissive|disabled] [--official] [--twin] [--grpc-only]
        [--broker-env KEY=VALUE ...] [--spy PREFIX] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid

from bench.cluster import Cluster, create_topic
from bench.cpu import cpu_seconds
from bench.measured import measure, start_cluster
from bench.modes import ROOT
from rmq.testing.procs import free_port, wait_port

QUEUES = 8
GROUP = "bench_grpc"


async def until_done(n: int, worker, inflight: int, cpu) -> tuple[int, float, float]:
    """Run ``inflight`` workers sharing a counter until it reaches ``n``; the
    time and CPU are taken when it does (a last long poll is not counted)."""
    state = {"got": 0}
    done = asyncio.Event()
    marks: dict[str, float] = {}
    t0 = time.perf_counter()

    def add(k: int) -> None:
        state["got"] += k
        if state["got"] >= n and not done.is_set():
            marks["t"], marks["cpu"] = time.perf_counter() - t0, cpu()
            done.set()

    tasks = [asyncio.ensure_future(worker(state, add, done)) for _ in range(inflight)]
    waiter = asyncio.ensure_future(done.wait())
    finished, _ = await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_EXCEPTION)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for t in finished:
        if t is not waiter and t.exception() is not None:
            raise t.exception()
    return state["got"], marks["t"], marks["cpu"]


# ---- remoting ------------------------------------------------------------------------------
async def remoting_send(c: Cluster, topic: str, n: int, size: int, inflight: int, cpu):
    from rmq.client.headers import send_header_v2
    from rmq.common.codes import RequestCode
    from rmq.remoting import RemotingClient, RemotingCommand

    client = RemotingClient()
    body = b"x" * size
    issued = {"k": 0}

    async def worker(state, add, done) -> None:
        while issued["k"] < n:
            i = issued["k"]
            issued["k"] += 1
            props = f"TAGS\x01T\x02UNIQ_KEY\x01{uuid.uuid4().hex.upper()}\x02WAIT\x01true\x02"
            ext = send_header_v2("bench_pg", topic, "TBW102", 4, i % QUEUES, 0,
                                 int(time.time() * 1000), 0, props, False, "broker-a")
            r = await client.invoke(c.broker_addr, RemotingCommand.create_request(
                RequestCode.SEND_MESSAGE_V2, ext, body), 5000)
            if r.code != 0:
                raise RuntimeError(f"send failed: {r.remark}")
            add(1)

    try:
        return await until_done(n, worker, inflight, cpu)
    finally:
        await client.close()


async def remoting_pop_ack(c: Cluster, topic: str, n: int, inflight: int, cpu):
    from rmq.client.pop import PopClient, handle_of
    from rmq.remoting import RemotingClient

    client = RemotingClient()
    pop = PopClient(c.broker_addr, "broker-a", client)

    async def worker(state, add, done) -> None:
        while not done.is_set():
            r = await pop.pop(GROUP, topic, max_nums=32, invisible_ms=60000, poll_ms=5000,
                              init_mode=0)
            for m in r.messages:
                await pop.ack(GROUP, topic, handle_of(m))
            add(len(r.messages))

    try:
        return await until_done(n, worker, inflight, cpu)
    finally:
        await client.close()


# ---- gRPC ------------------------------------------------------------------------------------
class GrpcClient:
    """One 5.x client: a channel, its id, its Telemetry stream open."""

    def __init__(self, port: int, settings) -> None:
        import grpc

        from rmq.proxy.v2 import service_pb2_grpc as sgrpc

        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        self.stub = sgrpc.MessagingServiceStub(self.channel)
        self.md = (("x-mq-client-id", f"bench@{uuid.uuid4().hex}"),)
        self.settings = settings
        self.stream = None

    async def open(self) -> None:
        from rmq.proxy.v2 import service_pb2 as spb

        queue: asyncio.Queue = asyncio.Queue()
        await queue.put(spb.TelemetryCommand(settings=self.settings))

        async def commands():
            while True:
                yield await queue.get()

        self.stream = self.stub.Telemetry(commands(), metadata=self.md)
        answer = await asyncio.wait_for(self.stream.read(), 10)
        if answer.status.code != 20000:
            raise RuntimeError(f"settings refused: {answer.status.message}")

    async def close(self) -> None:
        if self.stream is not None:
            self.stream.cancel()
        await self.channel.close()


async def grpc_send(c: Cluster, port: int, topic: str, n: int, size: int, inflight: int,
                    cpu):
    from rmq.proxy.v2 import definition_pb2 as pb
    from rmq.proxy.v2 import service_pb2 as spb

    client = GrpcClient(port, pb.Settings(client_type=pb.PRODUCER, publishing=pb.Publishing(
        topics=[pb.Resource(name=topic)])))
    await client.open()
    body = b"x" * size
    issued = {"k": 0}

    async def worker(state, add, done) -> None:
        while issued["k"] < n:
            issued["k"] += 1
            msg = pb.Message(topic=pb.Resource(name=topic), body=body,
                             system_properties=pb.SystemProperties(
                                 message_id=uuid.uuid4().hex.upper(), tag="T",
                                 message_type=pb.NORMAL))
            r = await client.stub.SendMessage(spb.SendMessageRequest(messages=[msg]),
                                              metadata=client.md, timeout=10)
            if r.status.code != pb.OK:
                raise RuntimeError(f"send failed: {r.status.message}")
            add(1)

    try:
        return await until_done(n, worker, inflight, cpu)
    finally:
        await client.close()


async def grpc_receive_ack(c: Cluster, port: int, topic: str, n: int, inflight: int, cpu):
    from google.protobuf.duration_pb2 import Duration

    from rmq.proxy.v2 import definition_pb2 as pb
    from rmq.proxy.v2 import service_pb2 as spb

    exp = pb.FilterExpression(type=pb.TAG, expression="*")
    client = GrpcClient(port, pb.Settings(client_type=pb.SIMPLE_CONSUMER, subscription=pb.Subscription(
        group=pb.Resource(name=GROUP), subscriptions=[pb.SubscriptionEntry(
            topic=pb.Resource(name=topic), expression=exp)])))
    await client.open()
    route = await client.stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name=topic)),
                                         metadata=client.md)
    mq = route.message_queues[0]
    request = spb.ReceiveMessageRequest(group=pb.Resource(name=GROUP), message_queue=mq,
                                        filter_expression=exp, batch_size=32,
                                        invisible_duration=Duration(seconds=60),
                                        long_polling_timeout=Duration(seconds=5))

    async def worker(state, add, done) -> None:
        while not done.is_set():
            msgs = [e.message async for e in client.stub.ReceiveMessage(
                request, metadata=client.md, timeout=15) if e.HasField("message")]
            for m in msgs:
                r = await client.stub.AckMessage(spb.AckMessageRequest(
                    group=pb.Resource(name=GROUP), topic=m.topic, entries=[spb.AckMessageEntry(
                        message_id=m.system_properties.message_id,
                        receipt_handle=m.system_properties.receipt_handle)]),
                    metadata=client.md, timeout=10)
                if r.status.code != pb.OK:
                    raise RuntimeError(f"ack failed: {r.status.message}")
            add(len(msgs))

    try:
        return await until_done(n, worker, inflight, cpu)
    finally:
        await client.close()


async def official(c: Cluster, port: int, what: str, topic: str, n: int, size: int,
                   threads: int) -> dict:
    """One run of ``bench.grpc_official``; the broker's CPU over the whole run."""
    python = ROOT / ".venv-rmq5" / "bin" / "python"
    if not python.exists():
        raise SystemExit("--official needs the client's virtualenv: make rmq5-client")
    pid = c.broker.proc.pid
    cpu0 = cpu_seconds(pid)
    proc = await asyncio.create_subprocess_exec(
        str(python), "-m", "bench.grpc_official", f"127.0.0.1:{port}", what, topic,
        GROUP + "_official", str(n), str(size), str(threads), stdout=asyncio.subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin"}, cwd=str(ROOT))
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"official client {what} failed ({proc.returncode})")
    got = json.loads(out.decode().strip().splitlines()[-1])
    result = {"path": f"official client {what}", "msgs": got["msgs"],
              "seconds": round(got["seconds"], 2),
              "msgs_per_s": round(got["msgs"] / got["seconds"]),
              "broker_cpu_us_per_msg": round((cpu_seconds(pid) - cpu0) / got["msgs"] * 1e6, 1)}
    print(json.dumps(result), flush=True)
    return result


async def main(args: argparse.Namespace) -> dict:
    port = free_port()
    env = {"tls.server.mode": args.tls_mode}
    env.update(kv.split("=", 1) for kv in args.broker_env)
    c = start_cluster(args.twin, {"grpcServerPort": str(port)}, env=env)
    try:
        wait_port(port, timeout=20)
        for topic in ("BenchRemoting", "BenchGrpc", "BenchOfficial"):
            await create_topic(c.broker_addr, c.namesrv_addr, topic, QUEUES)
        n, size, k = args.messages, args.size, args.inflight
        paths = {
            "remoting send": lambda cpu: remoting_send(c, "BenchRemoting", n, size, k, cpu),
            "gRPC send": lambda cpu: grpc_send(c, port, "BenchGrpc", n, size, k, cpu),
            "remoting pop+ack": lambda cpu: remoting_pop_ack(c, "BenchRemoting", n, k, cpu),
            "gRPC receive+ack": lambda cpu: grpc_receive_ack(c, port, "BenchGrpc", n, k, cpu),
        }
        results = []
        for i, (what, run) in enumerate(paths.items()):
            if args.grpc_only and not what.startswith("gRPC"):
                continue
            spy = f"{args.spy}.{i}" if args.spy else None
            results.append(await measure(c, what, run, spy))
        if args.official:
            results.append(await official(c, port, "send", "BenchOfficial", n, size, k))
            results.append(await official(c, port, "receive", "BenchOfficial", n, size, k))
    finally:
        c.stop()
    by = {r["path"]: r["broker_cpu_us_per_msg"] for r in results}
    return {"results": results, "tls_mode": args.tls_mode,
            "send_cpu_ratio": _ratio(by["gRPC send"], by.get("remoting send", 0)),
            "receive_cpu_ratio": _ratio(by["gRPC receive+ack"], by.get("remoting pop+ack", 0))}


def _ratio(a: float, b: float) -> float | None:
    """a / b; None when b is below the CPU clock's resolution (a short run)."""
    return round(a / b, 2) if b else None

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--inflight", type=int, default=16)
    ap.add_argument("--tls-mode", choices=("permissive", "disabled"), default="permissive")
    ap.add_argument("--official", action="store_true",
                    help="also through the official Python client (.venv-rmq5)")
    ap.add_argument("--twin", action="store_true")
    ap.add_argument("--grpc-only", action="store_true", help="skip the remoting paths")
    ap.add_argument("--broker-env", action="append", default=[], metavar="KEY=VALUE",
                    help="environment of the broker (GRPC_POLL_STRATEGY=poll, ...)")
    ap.add_argument("--spy", metavar="PREFIX",
                    help="py-spy's collapsed stacks of the broker per path, to PREFIX.<n>")
    ap.add_argument("--json", action="store_true")
    result = asyncio.run(main(ap.parse_args()))
    print(json.dumps(result) if "--json" in sys.argv else
          f"broker CPU per message, gRPC / remoting: send {result['send_cpu_ratio']}x, "
          f"receive+ack {result['receive_cpu_ratio']}x")
