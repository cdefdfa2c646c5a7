"""The load drivers: sends, consumes, produce-to-consume latency and idle
connections, each over a warm-up and a measured window, run in a subprocess
of its own (``python -m bench.load --load '<LoadSpec JSON>'``) on its own
uvloop so that client and broker are separate processes, as in production."""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass

from bench.cpu import CallWindow, CpuWindow, ThreadCpuWindow, can_pin, proc_status
from bench.modes import ROOT
from bench.raw import RawConnection, RawPulls, RawRequests, read_frame
from bench.stats import latency_summary
from rmq.testing.procs import affinity_setter


@dataclass(slots=True)
class LoadSpec:
    """What one load run does; ``kind`` is "send", "consume", "e2e" or "connections"."""

    kind: str
    namesrv: str
    topic: str
    seconds: float = 5.0
    warmup: float = 1.0
    size: int = 1024
    batch: int = 1
    inflight: int = 64
    rate: float = 0.0  # messages/s cap for sends (0 = as fast as possible)
    broker_pid: int = 0  # sampled for CPU over the measured window when > 0
    group: str = "bench_consumer"
    pull_batch: int = 32
    broker_addr: str = ""  # the connections load and raw sends connect here directly
    raw: bool = False  # hand-built request frames on one bare connection, not the SDK
    queues: int = 8  # raw loads: queue ids 0..queues-1 of ``topic``
    suspend_ms: int = 15_000  # e2e: how long the broker may hold a caught-up pull
    # raw sends: each request written as it is made (one write each, as a Java
    # client's channel does), not the requests of one turn of the loop together
    write_each: bool = False
    # raw sends: the frames of Apache RocketMQ 4.9.8's benchmark Producer
    # (ROCKETMQ binary header, its group and properties; ``JavaFrames``)
    java_frames: bool = False


def _result(spec: LoadSpec, msgs: int, nbytes: int, failures: int, elapsed: float,
            latencies: list[float], broker_cpu: float, client_cpu: float,
            errors: dict[str, int], threads: dict[str, float] | None = None,
            calls: CallWindow | None = None) -> dict:
    out = {"kind": spec.kind, "msgs": msgs, "bytes": nbytes, "failures": failures,
           "elapsed_s": elapsed, "msgs_per_s": msgs / elapsed if elapsed else 0.0,
           "mb_per_s": nbytes / elapsed / 1e6 if elapsed else 0.0,
           "requests": len(latencies), **latency_summary(latencies),
           "client_cpu_us_per_msg": 1e6 * client_cpu / msgs if msgs else 0.0,
           "errors": errors}
    if spec.broker_pid:
        out["broker_cpu_us_per_msg"] = 1e6 * broker_cpu / msgs if msgs else 0.0
        out["broker_cpu_util"] = broker_cpu / elapsed if elapsed else 0.0
        out.update({f"broker_{k}": v for k, v in proc_status(spec.broker_pid).items()})
    if calls is not None and msgs:
        out["broker_system_us_per_msg"] = 1e6 * calls.system / msgs
        out["broker_reads_per_msg"] = calls.reads / msgs
        out["broker_writes_per_msg"] = calls.writes / msgs
        out["broker_msgs_per_read"] = msgs / calls.reads if calls.reads else 0.0
    if threads is not None:
        per_msg = {name: 1e6 * sec / msgs if msgs else 0.0
                   for name, sec in sorted(threads.items(), key=lambda kv: -kv[1])}
        out["broker_threads_us_per_msg"] = per_msg
        out["broker_loop_cpu_us_per_msg"] = per_msg.get("loop", 0.0)
    return out


class _Window:
    """Counts only what completes between the end of the warm-up and the deadline."""

    def __init__(self, spec: LoadSpec) -> None:
        self.spec = spec
        self.measuring = False
        self.msgs = self.bytes = self.failures = 0
        self.latencies: list[float] = []
        self.errors: dict[str, int] = {}
        self.broker = CpuWindow(spec.broker_pid) if spec.broker_pid else None
        self.threads = ThreadCpuWindow(spec.broker_pid) if spec.broker_pid else None
        self.calls = CallWindow(spec.broker_pid) if spec.broker_pid else None
        self.client = CpuWindow(os.getpid())
        self.t0 = 0.0
        # the window in time.time_ns(), for loads that stamp their messages
        # (until it starts and ends, nothing is inside it)
        self.t0_ns = self.t1_ns = sys.maxsize

    def ok(self, msgs: int, nbytes: int, latency: float) -> None:
        if self.measuring:
            self.msgs += msgs
            self.bytes += nbytes
            self.latencies.append(latency)

    def fail(self, exc: BaseException) -> None:
        if self.measuring:
            self.failures += 1
            key = f"{type(exc).__name__}: {exc}"[:120]
            self.errors[key] = self.errors.get(key, 0) + 1

    async def run(self, workers: list) -> dict:
        # What the client set up so far (imports, connections, the SDK's
        # tables) is never garbage: frozen, the cyclic collector's full passes
        # in the measured window no longer walk it (15-20 ms pauses of the
        # load generator otherwise, measured as broker latency); the broker
        # does the same after its start-up.
        gc.collect()
        gc.freeze()
        stop = asyncio.Event()
        tasks = [asyncio.ensure_future(w(stop)) for w in workers]
        try:
            await asyncio.sleep(self.spec.warmup)
            if self.broker:
                self.broker.begin()
            if self.threads:
                self.threads.begin()
            if self.calls:
                self.calls.begin()
            self.client.begin()
            self.t0 = time.perf_counter()
            self.t0_ns = time.time_ns()
            self.measuring = True
            await asyncio.sleep(self.spec.seconds)
            self.measuring = False
            self.t1_ns = time.time_ns()
            elapsed = time.perf_counter() - self.t0
            broker_cpu = self.broker.end() if self.broker else 0.0
            threads = self.threads.end() if self.threads else None
            if self.calls:
                self.calls.end()
            client_cpu = self.client.end()
        finally:
            stop.set()
            await asyncio.wait(tasks, timeout=10)
            for t in tasks:
                t.cancel()
        return _result(self.spec, self.msgs, self.bytes, self.failures, elapsed,
                       self.latencies, broker_cpu, client_cpu, self.errors, threads,
                       self.calls)


async def _sdk_sender(spec: LoadSpec, body: bytes):
    """(send coroutine, close coroutine) of sends through ``rmq.client.Producer``."""
    from rmq.client import Message, Producer, ProducerConfig

    producer = Producer("bench_producer", spec.namesrv,
                        config=ProducerConfig(send_msg_timeout=10_000,
                                              compress_msg_body_over_howmuch=1 << 30))
    await producer.start()
    try:
        await producer.queues_of(spec.topic)
    except BaseException:
        await producer.shutdown()
        raise

    async def send(_n: int) -> None:
        if spec.batch > 1:
            await producer.send_batch([Message(spec.topic, body, tags="bench")
                                       for _ in range(spec.batch)])
        else:
            await producer.send(Message(spec.topic, body, tags="bench"))

    return send, producer.shutdown


async def _raw_sender(spec: LoadSpec, body: bytes):
    """(send coroutine, close coroutine) of ``RawRequests`` on one
    ``RawConnection`` straight to ``broker_addr``; a non-zero response code is
    a failure."""
    if not spec.broker_addr:
        raise ValueError("a raw send load needs broker_addr")
    requests = RawRequests(spec.topic, body, spec.batch, spec.queues, java=spec.java_frames)
    conn = await RawConnection.open(spec.broker_addr, spec.write_each)

    async def send(n: int) -> None:
        resp = await conn.send(*requests.frame(n))
        if resp.code != 0:
            raise RuntimeError(f"send failed: {resp.code} {resp.remark}")

    return send, conn.close


async def _lone_raw_load(spec: LoadSpec, body: bytes) -> dict:
    """One raw request in flight, sent and answered on a blocking socket in a
    thread: no event loop between the client's write and its read, so the
    round trip is the broker's and the machine's, not the load generator's."""
    import socket
    import threading

    from rmq.remoting import RemotingCommand

    host, _, port = spec.broker_addr.rpartition(":")
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    requests = RawRequests(spec.topic, body, spec.batch, spec.queues, java=spec.java_frames)
    window = _Window(spec)
    stopped = threading.Event()

    def pings() -> None:
        buf = bytearray()
        perf = time.perf_counter
        n = 0
        while not stopped.is_set():
            frame = requests.frame(n)[1]
            n += 1
            t0 = perf()
            sock.sendall(frame)
            answer = read_frame(sock, buf)
            took = perf() - t0
            if answer.startswith(b'{"code":0,', 4) or answer.startswith(b"\x01", 0) and \
                    answer.startswith(b"\x00\x00", 4):  # SUCCESS, without decoding the rest
                window.ok(spec.batch, spec.batch * spec.size, took)
                continue
            resp = RemotingCommand.decode(answer)
            if resp.code == 0:
                window.ok(spec.batch, spec.batch * spec.size, took)
            else:
                window.fail(RuntimeError(f"send failed: {resp.code} {resp.remark}"))

    async def worker(stop: asyncio.Event) -> None:
        done = asyncio.ensure_future(asyncio.to_thread(pings))
        await stop.wait()
        stopped.set()
        await done

    try:
        return await window.run([worker])
    finally:
        sock.close()


async def send_load(spec: LoadSpec) -> dict:
    """``inflight`` concurrent senders of ``size``-byte messages (``batch`` > 1:
    SEND_BATCH_MESSAGE of that many), optionally capped at ``rate`` msgs/s;
    through the client SDK, or with ``raw`` as hand-built requests (one raw
    request in flight without a rate: ``_lone_raw_load``)."""
    body = os.urandom(spec.size)
    if spec.raw and spec.inflight == 1 and not spec.rate:
        return await _lone_raw_load(spec, body)
    send, close = await (_raw_sender if spec.raw else _sdk_sender)(spec, body)
    window = _Window(spec)
    try:
        return await window.run(_senders(spec, window, send))
    finally:
        await close()


def _senders(spec: LoadSpec, window: _Window, send) -> list:
    """``inflight`` sender workers for ``window.run``, each awaiting
    ``send(n)`` in turn (``n`` = its own request numbers), together capped at
    ``rate`` messages/s when it is set."""
    interval = spec.inflight * spec.batch / spec.rate if spec.rate > 0 else 0.0
    start = time.perf_counter()

    async def worker(i: int, stop: asyncio.Event) -> None:
        perf = time.perf_counter
        # senders start spread over one interval, so a rate-limited run is a
        # steady stream of sends rather than bursts of all of them at once
        next_at = start + i * interval / spec.inflight
        n = i
        while not stop.is_set():
            if interval:
                delay = next_at - perf()
                if delay > 0:
                    await asyncio.sleep(delay)
                next_at += interval
            t0 = perf()
            try:
                await send(n)
            except Exception as exc:  # noqa: BLE001 - counted and reported, the run goes on
                window.fail(exc)
                await asyncio.sleep(0.01)
                continue
            finally:
                n += spec.inflight
            window.ok(spec.batch, spec.batch * spec.size, perf() - t0)

    return [functools.partial(worker, i) for i in range(spec.inflight)]


async def consume_load(spec: LoadSpec) -> dict:
    """The consume load: hand-built pulls with ``raw``, else through the SDK."""
    return await (_raw_consume_load if spec.raw else _sdk_consume_load)(spec)


_PULL_FOUND, _PULL_NOT_FOUND = 0, 19  # ResponseCode.SUCCESS, PULL_NOT_FOUND


def _pull_decoder():
    """The client's decoder of a pull response body (the compiled one when built)."""
    from rmq.client.codec import decode_messages

    return decode_messages


async def _raw_consume_load(spec: LoadSpec) -> dict:
    """Pull every queue of ``topic`` from offset 0 with ``RawPulls`` on one
    ``RawConnection`` straight to ``broker_addr``, ``pull_batch`` messages a
    pull, every message of every response decoded with the client's decoder
    and counted: a consumer that really sees each message and does little
    else.  One pull per queue is outstanding; a queue read to its end starts
    again at 0 (``passes``), so the backlog is re-read from the page cache for
    the whole window."""
    if not spec.broker_addr:
        raise ValueError("a raw consume load needs broker_addr")
    decode = _pull_decoder()
    pulls = RawPulls(spec.topic, spec.group, spec.queues, spec.pull_batch)
    conn = await RawConnection.open(spec.broker_addr)
    window = _Window(spec)
    passes = 0

    async def lane(queue_id: int, stop: asyncio.Event) -> None:
        nonlocal passes
        perf = time.perf_counter
        offset = 0
        while not stop.is_set():
            t0 = perf()
            try:
                resp = await conn.send(*pulls.frame(queue_id, offset))
                if resp.code == _PULL_FOUND:
                    msgs = decode(resp.body) if resp.body else []
                    window.ok(len(msgs), sum([len(m.body) for m in msgs]), perf() - t0)
                    offset = int(resp.ext_fields["nextBeginOffset"])
                elif resp.code == _PULL_NOT_FOUND:
                    offset = 0
                    passes += 1
                else:
                    raise RuntimeError(f"pull failed: {resp.code} {resp.remark}")
            except Exception as exc:  # noqa: BLE001 - counted and reported
                window.fail(exc)
                await asyncio.sleep(0.01)

    try:
        result = await window.run([functools.partial(lane, q) for q in range(spec.queues)])
        result["passes"] = passes
        result["lanes"] = spec.queues
        return result
    finally:
        await conn.close()


async def _max_offsets(conn: RawConnection, topic: str, queues: int) -> list[int]:
    """GET_MAX_OFFSET of queues 0..queues-1 of ``topic``."""
    from rmq.common.codes import RequestCode
    from rmq.remoting import RemotingCommand

    out = []
    for q in range(queues):
        req = RemotingCommand.create_request(RequestCode.GET_MAX_OFFSET,
                                             {"topic": topic, "queueId": str(q)})
        resp = await conn.send(req.opaque, req.encode())
        if resp.code != 0:
            raise RuntimeError(f"GET_MAX_OFFSET of {topic}:{q} failed: {resp.code} {resp.remark}")
        out.append(int(resp.ext_fields["offset"]))
    return out


async def e2e_load(spec: LoadSpec) -> dict:
    """Produce-to-consume latency: raw sends (``RawRequests`` with stamped
    bodies, ``inflight`` at a time, capped at ``rate`` msgs/s) and, in this
    same process on a connection of its own, a consumer long-polling every
    queue (``RawPulls`` with ``suspend_ms``, one pull per queue outstanding)
    that starts caught up, at the queues' max offsets, so the broker holds its
    pulls and answers them as messages arrive.  For each received message sent
    inside the measured window: receive time - send time, both
    ``time.time_ns()``.  After the window the sends stop and the consumer gets
    up to 5 s to receive the rest; ``e2e_lost`` counts what never came."""
    if not spec.broker_addr:
        raise ValueError("the e2e load needs broker_addr")
    decode = _pull_decoder()
    requests = RawRequests(spec.topic, os.urandom(max(spec.size, 8)), 1, spec.queues,
                           stamp=True)
    sender = await RawConnection.open(spec.broker_addr, spec.write_each)
    puller = await RawConnection.open(spec.broker_addr)
    window = _Window(spec)
    pulls = RawPulls(spec.topic, spec.group, spec.queues, spec.pull_batch, spec.suspend_ms)
    e2e: list[int] = []  # ns, messages stamped inside the window
    counts = {"sent": 0, "pulls": 0, "caught_up": 0, "found": 0}
    consumer_stop = asyncio.Event()

    async def pull_lane(queue_id: int, offset: int) -> None:
        seen_max = offset
        while not consumer_stop.is_set():
            measuring = window.measuring
            if measuring:
                counts["pulls"] += 1
                counts["caught_up"] += offset >= seen_max  # the broker holds this one
            try:
                resp = await puller.send(*pulls.frame(queue_id, offset))
                code = resp.code
                if code == _PULL_FOUND:
                    msgs = decode(resp.body) if resp.body else []
                    now = time.time_ns()
                    t0, t1 = window.t0_ns, window.t1_ns
                    for m in msgs:
                        stamp = int.from_bytes(m.body[:8], "big")
                        if t0 <= stamp < t1:
                            e2e.append(now - stamp)
                    counts["found"] += measuring
                elif code not in (_PULL_NOT_FOUND, 20, 21):  # held until timeout / moved
                    raise RuntimeError(f"pull failed: {code} {resp.remark}")
                ext = resp.ext_fields
                offset = int(ext["nextBeginOffset"])
                seen_max = int(ext["maxOffset"])
            except Exception as exc:  # noqa: BLE001 - counted and reported
                if consumer_stop.is_set():
                    return
                window.fail(exc)
                await asyncio.sleep(0.01)

    async def send(n: int) -> None:
        opaque, frame = requests.frame(n)
        stamp = requests.last_stamp
        resp = await sender.send(opaque, frame)
        if resp.code != 0:
            raise RuntimeError(f"send failed: {resp.code} {resp.remark}")
        if window.t0_ns <= stamp < window.t1_ns:
            counts["sent"] += 1

    lanes = []
    try:
        starts = await _max_offsets(puller, spec.topic, spec.queues)
        lanes = [asyncio.ensure_future(pull_lane(q, off)) for q, off in enumerate(starts)]
        result = await window.run(_senders(spec, window, send))
        deadline = time.monotonic() + 5.0
        while len(e2e) < counts["sent"] and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
    finally:
        consumer_stop.set()
        await sender.close()
        await puller.close()
        if lanes:
            await asyncio.wait(lanes, timeout=5)
            for t in lanes:
                t.cancel()
    summary = latency_summary(ns / 1e9 for ns in e2e)
    result.update({f"e2e_{k}": v for k, v in summary.items()})
    result.update({"e2e_sent": counts["sent"], "e2e_received": len(e2e),
                   "e2e_lost": max(0, counts["sent"] - len(e2e)), "e2e_pulls": counts["pulls"],
                   "e2e_msgs_per_pull": counts["found"] and len(e2e) / counts["found"],
                   "e2e_caught_up_pulls": counts["pulls"] and counts["caught_up"] / counts["pulls"]})
    return result


async def _sdk_consume_load(spec: LoadSpec) -> dict:
    """Pull every queue of ``topic`` from offset 0, ``pull_batch`` messages a
    pull; a queue read to its end starts again at 0, so the backlog is consumed
    from the page cache over and over for the whole measured window
    (``passes`` counts the wrap-arounds).  Like a RocketMQ consumer, at most one
    pull per queue is outstanding, so ``min(inflight, queues)`` lanes pull at
    once, each going round its own share of the queues."""
    from rmq.client import LitePullConsumer, PullStatus

    consumer = LitePullConsumer(spec.group, spec.namesrv, auto_commit=False)
    await consumer.start()  # registered first, so the route fills its queue table
    queues = await consumer.fetch_queues(spec.topic)
    if not queues:
        await consumer.shutdown()
        raise RuntimeError(f"no readable queues of {spec.topic} in its route")
    consumer.assign(queues)
    window = _Window(spec)
    lanes = max(1, min(spec.inflight, len(queues)))
    passes = 0

    async def lane(own: list, stop: asyncio.Event) -> None:
        nonlocal passes
        perf = time.perf_counter
        positions = dict.fromkeys(own, 0)
        turn = 0
        while not stop.is_set():
            mq = own[turn % len(own)]
            turn += 1
            t0 = perf()
            try:
                result = await consumer.pull(mq, positions[mq], spec.pull_batch)
            except Exception as exc:  # noqa: BLE001 - counted and reported
                window.fail(exc)
                await asyncio.sleep(0.01)
                continue
            if result.status is PullStatus.FOUND:
                positions[mq] = result.next_begin_offset
                window.ok(len(result.messages), sum(len(m.body) for m in result.messages),
                          perf() - t0)
            elif result.status is PullStatus.NO_NEW_MSG:
                positions[mq] = 0
                passes += 1
            else:
                positions[mq] = result.next_begin_offset

    try:
        result = await window.run([functools.partial(lane, queues[i::lanes]) for i in range(lanes)])
        result["passes"] = passes
        result["lanes"] = lanes
        return result
    finally:
        await consumer.shutdown()


async def connections_load(spec: LoadSpec) -> dict:
    """``inflight`` idle clients: one TCP connection each to the broker that
    sends one HEART_BEAT (a producer of its own group), held open for
    ``seconds``; the broker's memory is sampled while they are connected."""
    from rmq.client.heartbeat import HeartbeatData
    from rmq.common.codes import RequestCode
    from rmq.remoting import RemotingCommand

    if not spec.broker_addr:
        raise RuntimeError("the connections load needs broker_addr")
    host, _, port = spec.broker_addr.rpartition(":")
    writers = []
    failures = 0
    t0 = time.perf_counter()
    latencies: list[float] = []

    async def connect(i: int) -> None:
        nonlocal failures
        try:
            reader, writer = await asyncio.open_connection(host, int(port))
            body = HeartbeatData(f"127.0.0.1@bench-{os.getpid()}-{i}", [f"bench_pg_{i}"]).encode()
            t = time.perf_counter()
            writer.write(RemotingCommand.create_request(RequestCode.HEART_BEAT, None, body).encode())
            size = int.from_bytes(await reader.readexactly(4), "big")
            resp = RemotingCommand.decode(await reader.readexactly(size))
            latencies.append(time.perf_counter() - t)
            if resp.code != 0:
                failures += 1
            writers.append(writer)
        except (OSError, asyncio.IncompleteReadError):
            failures += 1

    for start in range(0, spec.inflight, 100):  # 100 handshakes at a time
        await asyncio.gather(*(connect(i) for i in range(start, min(start + 100, spec.inflight))))
    elapsed = time.perf_counter() - t0
    await asyncio.sleep(spec.seconds)
    out = {"kind": spec.kind, "connections": len(writers), "failures": failures,
           "connect_s": elapsed, **latency_summary(latencies)}
    if spec.broker_pid:
        out.update({f"broker_{k}": v for k, v in proc_status(spec.broker_pid).items()})
    for w in writers:
        w.close()
    return out


def run_load(spec: LoadSpec) -> dict:
    """Run one load spec on a fresh uvloop loop in this process."""
    import uvloop

    drivers = {"send": send_load, "consume": consume_load, "e2e": e2e_load,
               "connections": connections_load}
    if spec.kind not in drivers:
        raise ValueError(f"unknown load kind {spec.kind!r} (expected one of {sorted(drivers)})")
    driver = drivers[spec.kind]
    return uvloop.run(driver(spec))


def load_in_subprocess(spec: LoadSpec, env: dict[str, str], timeout: float | None = None,
                       cpu: int | None = None) -> dict:
    """Run ``spec`` in a child interpreter with ``env`` (compiled or twin client)
    so that client and broker are separate processes, as in production;
    ``cpu`` pins the child to that CPU (when ``can_pin()``)."""
    from dataclasses import asdict

    cmd = [sys.executable, "-m", "bench.load", "--load", json.dumps(asdict(spec))]
    limit = timeout or spec.warmup + spec.seconds + 90
    cpus = {cpu} if cpu is not None and can_pin() else None
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=limit, cwd=ROOT,
                         preexec_fn=affinity_setter(cpus))
    if out.returncode != 0:
        raise RuntimeError(f"load {spec.kind} failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _main(argv: list[str]) -> int:
    """``python -m bench.load --load '<LoadSpec JSON>'``: one load run, JSON on stdout."""
    import argparse

    ap = argparse.ArgumentParser(description="run one benchmark load (used by bench/run.py)")
    ap.add_argument("--load", required=True, help="LoadSpec as JSON")
    args = ap.parse_args(argv)
    try:
        spec = LoadSpec(**json.loads(args.load))
    except (TypeError, ValueError) as exc:
        print(f"bad --load spec: {exc}", file=sys.stderr)
        return 2
    try:
        result = run_load(spec)
    except ValueError as exc:
        print(f"bad --load spec: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
