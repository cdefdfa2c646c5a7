"""Shared benchmark helpers: a throw-away name server + broker on free loopback
ports, process CPU/memory sampling, latency statistics, load drivers (through
``rmq.client``, or hand-built send requests that leave the SDK out), and the
Markdown/JSON result tables.

Every bench script may use it (``from bench.common import ...`` after putting
the project root on ``sys.path``).  Nothing here keeps state between runs: each
``Cluster`` gets a fresh store directory that is removed when it stops.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.procs import RmqProcess, affinity_setter, free_port  # noqa: E402

OUT_DIR = ROOT / "bench" / "out"
MODES = ("compiled", "twin")


# --- environment ----------------------------------------------------------------
def mode_env(mode: str, base: dict | None = None) -> dict[str, str]:
    """Environment of a subprocess running the compiled build or the twins.

    The compiled mode *requires* the extensions, so a missing ``make ext``
    fails loudly instead of silently measuring the twins twice."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r} (expected one of {MODES})")
    env = dict(os.environ if base is None else base)
    env.pop("RMQ_NO_EXTENSIONS", None)
    env.pop("RMQ_REQUIRE_EXTENSIONS", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    if mode == "twin":
        env["RMQ_NO_EXTENSIONS"] = "1"
    else:
        env["RMQ_REQUIRE_EXTENSIONS"] = "1"
    return env


def current_mode() -> str:
    """The build this process was asked to use: "twin" under RMQ_NO_EXTENSIONS=1."""
    return "twin" if os.environ.get("RMQ_NO_EXTENSIONS") == "1" else "compiled"


# --- processes --------------------------------------------------------------------
def proc_status(pid: int) -> dict[str, int]:
    """VmRSS / RssAnon / RssFile / VmHWM of ``pid`` in bytes, from /proc/<pid>/status.

    RssAnon is the figure that matters for a broker: the mapped store's pages
    are RssFile and belong to the page cache."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
                out[key] = int(rest.split()[0]) * 1024
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds consumed so far by ``pid`` (and its threads)."""
    import psutil

    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


@dataclass(slots=True)
class CpuWindow:
    """CPU seconds of a process over a measured window (start .. stop)."""

    pid: int
    start: float = 0.0
    seconds: float = 0.0

    def begin(self) -> None:
        self.start = cpu_seconds(self.pid)

    def end(self) -> float:
        self.seconds = cpu_seconds(self.pid) - self.start
        return self.seconds


# Pinning (bench/run.py by default): the broker and its name server on one
# core, the load generator on the other, so neither steals the other's CPU
# and the broker's figures are those of one core.
BROKER_CPUS = frozenset({0})
LOAD_CPU = 1


def can_pin() -> bool:
    """True when this machine has the two CPUs the pinning uses and this
    process may run on both (nothing is pinned otherwise)."""
    if not hasattr(os, "sched_setaffinity") or (os.cpu_count() or 1) < 2:
        return False
    return {*BROKER_CPUS, LOAD_CPU} <= os.sched_getaffinity(0)


def pin_to_broker_cpus() -> None:
    """Run this process where bench/run.py runs the broker, when it can pin:
    the floor scripts measure what the broker's core would pay."""
    if can_pin():
        os.sched_setaffinity(0, BROKER_CPUS)


def stat_cpu_ticks(path: str) -> tuple[str, int] | None:
    """(kernel name, utime + stime in clock ticks) from a /proc ``stat`` file;
    None when the process or thread is gone."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # "tid (comm) state ppid ...": comm may hold spaces and parentheses
    head, _, rest = raw.rpartition(b")")
    comm = head.partition(b"(")[2].decode(errors="replace")
    fields = rest.split()
    return comm, int(fields[11]) + int(fields[12])  # utime, stime


def thread_cpu_ticks(pid: int) -> dict[int, tuple[str, int]]:
    """{tid: (kernel name, utime + stime in clock ticks)} of every thread of ``pid``.

    Read from /proc/<pid>/task/*/stat; a thread that ends while it is read is
    left out."""
    out: dict[int, tuple[str, int]] = {}
    base = f"/proc/{pid}/task"
    for entry in os.listdir(base):
        ticks = stat_cpu_ticks(f"{base}/{entry}/stat")
        if ticks is not None:
            out[int(entry)] = ticks
    return out


@functools.cache
def _known_thread_names() -> tuple[str, ...]:
    """The full names the broker's threads give themselves; the kernel keeps
    only the first 15 bytes of each."""
    from rmq.store import allocate, clean, flush, index, stats  # noqa: F401 - subclasses
    from rmq.store.service import ServiceThread

    names = {allocate.THREAD_NAME, index.FLUSH_THREAD_NAME}
    todo = [ServiceThread]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        names.add(cls.name)
    return tuple(sorted(names))


def thread_label(pid: int, tid: int, comm: str) -> str:
    """"loop" for the process's first thread (the event loop), else the
    thread's own name: a 15-byte kernel name is widened back to the one full
    name of the broker's threads it starts (FlushRealTimeSe ->
    FlushRealTimeService)."""
    if tid == pid:
        return "loop"
    if len(comm.encode()) >= 15:
        full = [n for n in _known_thread_names() if n.startswith(comm)]
        if len(full) == 1:
            return full[0]
    return comm


@dataclass(slots=True)
class ThreadCpuWindow:
    """CPU seconds of each thread of a process over a measured window, summed
    by thread name (see ``thread_label``)."""

    pid: int
    start: dict[int, tuple[str, int]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def begin(self) -> None:
        self.start = thread_cpu_ticks(self.pid)

    def end(self) -> dict[str, float]:
        tick = os.sysconf("SC_CLK_TCK")
        out: dict[str, float] = {}
        for tid, (comm, ticks) in thread_cpu_ticks(self.pid).items():
            before = self.start.get(tid)
            used = ticks - (before[1] if before is not None else 0)
            name = thread_label(self.pid, tid, comm)
            out[name] = out.get(name, 0.0) + used / tick
        self.seconds = out
        return out


@dataclass
class Cluster:
    """One ``rmq-namesrv`` and one ``rmq-broker`` on free loopback ports with a
    fresh store; ``broker_conf`` adds/overrides broker properties
    (e.g. ``{"flushDiskType": "SYNC_FLUSH"}``); ``pin`` restricts both
    processes (every thread they start) to ``BROKER_CPUS`` when ``can_pin()``."""

    env: dict[str, str] = field(default_factory=lambda: mode_env("compiled"))
    broker_conf: dict[str, str] = field(default_factory=dict)
    workdir: Path | None = None
    keep: bool = False
    namesrv: RmqProcess | None = None
    broker: RmqProcess | None = None
    ns_port: int = 0
    port: int = 0
    broker_start_s: float = 0.0  # process start until its port answers (store load + recovery)
    pin: bool = False
    pinned: bool = False  # pin was asked for and the machine allowed it

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.ns_port}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def broker_pid(self) -> int:
        assert self.broker is not None
        return self.broker.pid

    @property
    def store_dir(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "store"

    def start(self, timeout: float = 60.0) -> Cluster:
        OUT_DIR.mkdir(parents=True, exist_ok=True)
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="cluster-", dir=OUT_DIR))
        self.workdir.mkdir(parents=True, exist_ok=True)
        env = dict(self.env, ROCKETMQ_HOME=str(self.workdir))
        self.pinned = self.pin and can_pin()
        cpus = set(BROKER_CPUS) if self.pinned else None
        self.ns_port = free_port()
        ns_conf = self.workdir / "namesrv.conf"
        ns_conf.write_text(f"listenPort={self.ns_port}\nbindAddress=127.0.0.1\n"
                           f"kvConfigPath={self.workdir}/kv.json\n")
        self.namesrv = RmqProcess("rmq.namesrv.startup", ["-c", str(ns_conf)],
                                  self.workdir / "namesrv.out", env=env, cpus=cpus)
        self.namesrv.start(wait_for_port=self.ns_port, timeout=timeout)
        self.port = free_port(span=4) + 2  # listenPort-2 (fast) .. listenPort+1 (HA)
        props = {"brokerName": "broker-bench", "brokerClusterName": "BenchCluster",
                 "listenPort": str(self.port), "brokerIP1": "127.0.0.1",
                 "brokerIP2": "127.0.0.1", "storePathRootDir": str(self.store_dir),
                 "storePathCommitLog": str(self.store_dir / "commitlog"),
                 **self.broker_conf}
        conf = self.workdir / "broker.conf"
        conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.broker = RmqProcess("rmq.broker.startup", ["-c", str(conf), "-n", self.namesrv_addr],
                                 self.workdir / "broker.out", env=env, cpus=cpus)
        t0 = time.monotonic()
        try:
            self.broker.start(wait_for_port=self.port, timeout=timeout)
            self.broker_start_s = time.monotonic() - t0
        except Exception:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop both processes (SIGTERM, SIGKILL after a grace) and drop the store."""
        for proc in (self.broker, self.namesrv):
            if proc is not None:
                proc.stop(timeout=30)
        if self.workdir is not None and not self.keep:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


async def create_topic(broker_addr: str, namesrv_addr: str, topic: str, queues: int = 8,
                       timeout: float = 60.0) -> None:
    """UPDATE_AND_CREATE_TOPIC on the broker, then wait until the name server
    routes it (consumers find their queues through the route)."""
    from rmq.common.codes import RequestCode
    from rmq.remoting import RemotingClient, RemotingCommand

    client = RemotingClient()
    try:
        header = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
                  "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG",
                  "topicSysFlag": "0", "order": "false"}
        resp = await client.invoke(broker_addr, RemotingCommand.create_request(
            RequestCode.UPDATE_AND_CREATE_TOPIC, header), 10_000)
        if resp.code != 0:
            raise RuntimeError(f"creating topic {topic} failed: {resp.code} {resp.remark}")
        deadline = time.monotonic() + timeout
        while True:
            route = await client.invoke(namesrv_addr, RemotingCommand.create_request(
                RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 10_000)
            if route.code == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the name server does not route {topic} after {timeout:g} s")
            await asyncio.sleep(0.2)
    finally:
        await client.close()


# --- statistics -------------------------------------------------------------------
def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of an already sorted sequence."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def latency_summary(seconds: Iterable[float]) -> dict[str, float]:
    """avg / p50 / p99 / max in milliseconds of latencies given in seconds."""
    values = sorted(seconds)
    if not values:
        return {"avg_ms": 0.0, "p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0}
    return {"avg_ms": 1000 * sum(values) / len(values),
            "p50_ms": 1000 * percentile(values, 50),
            "p99_ms": 1000 * percentile(values, 99),
            "max_ms": 1000 * values[-1]}


# --- load drivers (run inside a load subprocess, on its own uvloop) ----------------
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
            errors: dict[str, int], threads: dict[str, float] | None = None) -> dict:
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
            client_cpu = self.client.end()
        finally:
            stop.set()
            await asyncio.wait(tasks, timeout=10)
            for t in tasks:
                t.cancel()
        return _result(self.spec, self.msgs, self.bytes, self.failures, elapsed,
                       self.latencies, broker_cpu, client_cpu, self.errors, threads)


class RawRequests:
    """SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE) request frames built by hand:
    what a client must send, nothing more, so a load of them measures the
    broker and not the client (no route lookups, no per-message id, header
    or command objects).

    Each queue's frame is encoded once, with a ten-digit opaque, a 13-digit
    bornTimestamp and (single sends) a UNIQ_KEY ending in twelve hex digits;
    every request is a copy of it with those three patched in place, so the
    wire bytes are those of a freshly encoded request.  Every single message
    carries a distinct UNIQ_KEY and WAIT=true like the SDK's; a batch body is
    encoded once and sent again and again, as a load generator does (its
    messages have distinct UNIQ_KEYs within the batch).

    ``stamp`` (single sends): the first 8 bytes of every body are the send's
    ``time.time_ns()``, big-endian (``last_stamp``), so a consumer can tell
    how long each message took from producer to consumer."""

    OPAQUE_BASE = 1_000_000_000  # opaques stay ten digits for 1.1 billion requests
    _TS = 1_700_000_000_000  # placeholder bornTimestamp (13 digits)

    def __init__(self, topic: str, body: bytes, batch: int = 1, queues: int = 8,
                 group: str = "bench_producer", broker_name: str = "",
                 stamp: bool = False, java: bool = False) -> None:
        from rmq.client.codec import encode_batch
        from rmq.client.message import Message

        if batch < 1 or queues < 1:
            raise ValueError(f"raw sends need batch >= 1 and queues >= 1 "
                             f"(got batch={batch}, queues={queues})")
        if stamp and (batch != 1 or len(body) < 8):
            raise ValueError("stamped bodies need single sends of at least 8 bytes")
        self.topic = topic
        self.batch = batch
        self.queues = queues
        self.stamp = stamp
        self.last_stamp = 0
        self.prefix = f"7F000001{os.getpid() & 0xFFFF:04X}{int(time.time()):08X}"
        self.seq = 0
        self.opaque = self.OPAQUE_BASE
        self.java = java
        if java and batch > 1:
            raise ValueError("the Java benchmark Producer sends single messages")
        if java:
            group = "benchmark_producer"
        if batch > 1:
            batch_body = encode_batch([
                Message(topic, body, properties={"UNIQ_KEY": self._uniq(), "WAIT": "true"})
                for _ in range(batch)])
            self._templates = [self._template(q, group, broker_name, batch_body) for q in range(queues)]
        else:
            self._templates = [self._template(q, group, broker_name, body) for q in range(queues)]

    def _uniq(self) -> str:
        self.seq += 1
        return f"{self.prefix}{self.seq:012X}"

    def _template(self, queue_id: int, group: str, broker_name: str, body: bytes) -> tuple:
        """(frame, opaque at, timestamp at, UNIQ_KEY counter at or -1) of a queue."""
        from rmq.client.headers import send_header_v2
        from rmq.common.codes import RequestCode
        from rmq.remoting import RemotingCommand

        single = self.batch == 1
        props = f"WAIT\x01true\x02UNIQ_KEY\x01{self.prefix}{0:012X}\x02" if single else ""
        if self.java:
            props = java_benchmark_properties(f"{self.prefix}{0:012X}")
        code = RequestCode.SEND_MESSAGE_V2 if single else RequestCode.SEND_BATCH_MESSAGE
        ext = send_header_v2(group, self.topic, "TBW102", 4, queue_id, 0, self._TS, 0, props,
                             not single, "" if self.java else broker_name)
        if self.java:
            ext = {k: v for k, v in ext.items() if k in "abcdefghijkm"}  # 4.9.8's V2 letters
        cmd = RemotingCommand(code, 0, 409, self.OPAQUE_BASE, 0, None, ext, body,
                              1 if self.java else 0)
        frame = bytes(cmd.encode_header()) + body
        head = frame[:len(frame) - len(body)]
        uniq_at = head.index(self.prefix.encode()) + len(self.prefix) if single else -1
        # the opaque: ten digits in a JSON header, an int32 at a fixed place in a binary one
        op_at = 13 if self.java else head.index(b'"opaque":%d' % self.OPAQUE_BASE) + 9
        ts_at = head.index(b"%d" % self._TS) if self.java else head.index(b'"%d"' % self._TS) + 1
        return (frame, op_at, ts_at, uniq_at, len(head))

    def frame(self, n: int) -> tuple[int, bytearray]:
        """(opaque, frame) of the ``n``-th request (queue ``n % queues``)."""
        frame, op_at, ts_at, uniq_at, body_at = self._templates[n % self.queues]
        self.opaque = opaque = self.opaque + 1
        out = bytearray(frame)
        if self.java:
            out[op_at:op_at + 4] = opaque.to_bytes(4, "big")
        else:
            out[op_at:op_at + 10] = b"%d" % opaque
        now = time.time_ns()
        out[ts_at:ts_at + 13] = b"%d" % (now // 1_000_000)
        if uniq_at >= 0:
            self.seq += 1
            out[uniq_at:uniq_at + 12] = b"%012X" % self.seq
        if self.stamp:
            self.last_stamp = now
            out[body_at:body_at + 8] = now.to_bytes(8, "big")
        return opaque, out


def java_benchmark_properties(uniq_key: str) -> str:
    """The properties string of a message of 4.9.8's benchmark Producer as its
    client writes it: ``new Message(topic, body)`` sets WAIT=true, the send
    sets UNIQ_KEY; ``messageProperties2String`` walks the HashMap (UNIQ_KEY's
    bucket comes first) and ends every pair with the separator."""
    return f"UNIQ_KEY\x01{uniq_key}\x02WAIT\x01true\x02"


class RawPulls:
    """PULL_MESSAGE request frames built by hand, the pull side of
    ``RawRequests``: the header of each queue is encoded once and every pull
    is that header with its queue offset and opaque filled in.

    The request carries its subscription ("*", sysFlag SUBSCRIPTION as a lite
    pull consumer sends it), so the broker needs no heartbeat of the group;
    ``suspend_ms`` > 0 adds sysFlag SUSPEND and suspendTimeoutMillis, the long
    polling of a push consumer: a pull that finds nothing new is held by the
    broker until a message arrives or the time is up."""

    OPAQUE_BASE = RawRequests.OPAQUE_BASE
    _OFFSET = "QUEUEOFFSET"  # placeholder of the queue offset in the header template

    def __init__(self, topic: str, group: str = "bench_consumer", queues: int = 8,
                 max_nums: int = 32, suspend_ms: int = 0, broker_name: str = "") -> None:
        from rmq.client import headers as h
        from rmq.common.codes import RequestCode
        from rmq.remoting import RemotingCommand

        flag = h.PULL_FLAG_SUBSCRIPTION | (h.PULL_FLAG_SUSPEND if suspend_ms > 0 else 0)
        self.opaque = self.OPAQUE_BASE
        self._formats: list[tuple[bytes, bool]] = []
        for q in range(queues):
            ext = h.pull_header(group, topic, q, 0, max_nums, flag, 0, suspend_ms, "*", 0,
                                "TAG", broker_name)
            ext["queueOffset"] = self._OFFSET
            cmd = RemotingCommand(RequestCode.PULL_MESSAGE, 0, 409, self.OPAQUE_BASE, 0, None,
                                  ext, None, 0)
            head = bytes(cmd.encode_header())
            if head[4] != 0:  # the top byte of the header-length word: JSON
                raise ValueError("pull templates expect a JSON header")
            text = head[8:].replace(b"%", b"%%")
            opaque = b'"opaque":%d' % self.OPAQUE_BASE
            offset_first = text.index(self._OFFSET.encode()) < text.index(opaque)
            text = text.replace(self._OFFSET.encode(), b"%d").replace(opaque, b'"opaque":%d')
            self._formats.append((text, offset_first))

    def frame(self, queue_id: int, offset: int) -> tuple[int, bytes]:
        """(opaque, frame) of a pull of ``queue_id`` from ``offset``."""
        text, offset_first = self._formats[queue_id]
        self.opaque = opaque = self.opaque + 1
        header = text % ((offset, opaque) if offset_first else (opaque, offset))
        n = len(header)
        return opaque, b"".join((_LENGTHS.pack(n + 4, n), header))


_LENGTHS = struct.Struct(">II")  # frame length, header length (serialize type 0: JSON)


class RawConnection(asyncio.Protocol):
    """One TCP connection for ``RawRequests`` frames: the frames written in
    one turn of the loop go out in one write (``write_each``: each at once),
    responses are matched to their requests by opaque.  A lost connection
    fails whatever is outstanding."""

    def __init__(self, write_each: bool = False) -> None:
        from rmq.remoting import RemotingCommand

        self._decode = RemotingCommand.decode
        self._transport: asyncio.Transport | None = None
        self._buf = bytearray()
        self._out: list[bytearray] = []
        self._pending: dict[int, asyncio.Future] = {}
        self._loop = asyncio.get_running_loop()
        self._write_each = write_each

    @classmethod
    async def open(cls, addr: str, write_each: bool = False) -> RawConnection:
        host, _, port = addr.rpartition(":")
        _t, conn = await asyncio.get_running_loop().create_connection(
            lambda: cls(write_each), host, int(port))
        return conn

    def connection_made(self, transport) -> None:
        self._transport = transport

    def connection_lost(self, exc) -> None:
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(ConnectionError(f"connection lost: {exc}"))

    def data_received(self, data: bytes) -> None:
        # frames are decoded where they lie (``data`` itself when nothing was
        # left over): large pull responses are copied once, into the body
        buf = self._buf
        if buf:
            buf += data
            data = buf
        pos, n = 0, len(data)
        with memoryview(data) as view:
            while n - pos >= 4:
                size = int.from_bytes(view[pos:pos + 4], "big")
                if n - pos - 4 < size:
                    break
                resp = self._decode(view[pos + 4:pos + 4 + size])
                pos += 4 + size
                fut = self._pending.pop(resp.opaque, None)
                if fut is not None and not fut.done():
                    fut.set_result(resp)
        if data is buf:
            del buf[:pos]
        elif pos < n:
            buf += data[pos:]

    async def send(self, opaque: int, frame: bytearray):
        """Write ``frame`` and wait for the response to ``opaque``."""
        if self._transport is None or self._transport.is_closing():
            raise ConnectionError("connection closed")
        fut = self._pending[opaque] = self._loop.create_future()
        if self._write_each:
            self._transport.write(frame)
            return await fut
        if not self._out:
            self._loop.call_soon(self._flush)
        self._out.append(frame)
        return await fut

    def _flush(self) -> None:
        out, self._out = self._out, []
        if self._transport is not None and not self._transport.is_closing():
            self._transport.writelines(out)

    async def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


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


def read_frame(sock, buf: bytearray) -> bytes:
    """One length-prefixed frame (without its length) from a blocking socket;
    ``buf`` keeps what arrived after it."""
    while True:
        if len(buf) >= 4:
            n = int.from_bytes(buf[:4], "big")
            if len(buf) >= 4 + n:
                frame = bytes(buf[4:4 + n])
                del buf[:4 + n]
                return frame
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        buf += chunk


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

    cmd = [sys.executable, str(ROOT / "bench" / "common.py"), "--load", json.dumps(asdict(spec))]
    limit = timeout or spec.warmup + spec.seconds + 90
    cpus = {cpu} if cpu is not None and can_pin() else None
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=limit, cwd=ROOT,
                         preexec_fn=affinity_setter(cpus))
    if out.returncode != 0:
        raise RuntimeError(f"load {spec.kind} failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- result tables ------------------------------------------------------------------
def fmt(value) -> str:
    """Compact human formatting of a figure for the Markdown table."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.3g}"
    return str(value)


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(fmt(v) for v in row) + " |")
    return "\n".join(lines) + "\n"


def write_results(stem: str, doc: dict, markdown: str, out_dir: Path = OUT_DIR) -> tuple[Path, Path]:
    """Write ``<stem>.json`` and ``<stem>.md`` under ``out_dir``; returns both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    jpath, mpath = out_dir / f"{stem}.json", out_dir / f"{stem}.md"
    jpath.write_text(json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n")
    mpath.write_text(markdown)
    return jpath, mpath


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _main(argv: list[str]) -> int:
    """``python bench/common.py --load '<LoadSpec JSON>'``: one load run, JSON on stdout."""
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
