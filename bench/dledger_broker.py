"""Send throughput and broker CPU per message of a broker on a three-node
DLedger group beside a single ASYNC_FLUSH master, with the same load in one
run: ``bench/producer.py`` (the rmq client, ``--inflight`` sync sends of
``--size`` bytes) against each; CPU per message is the master's (the
leader's) process CPU, and for the group also its two followers'.  The group
runs twice: with rmq's default (``enableBatchPush=true``: batches of entries
per push) and with 4.9.8's default (``enableBatchPush=false``: one push per
entry); beside each, the master's CPU per message as a multiple of the single
master's.  With ``--same-rate`` the single master runs again, its load held
to the group's msgs/s (``bench/producer.py --rate``): the two compared at the
same rate as well as at the same sends in flight.  With ``--full-page-cache``
the page cache is topped up before each run (``bench.page_cache``): new
entry and commit-log pages then come from reclaim, as on a broker in
service, not from free memory the host took back, whose first touch is a
fault the host serves: a cost that lands on the group (three stores' new
pages, and its pushes' socket buffers) harder than on the single master.
With both, the floor's servers run on a topped-up page cache too.
With ``--java-frames`` the load is ``bench.java_frames``' rather than the
rmq client's: the frames of Apache RocketMQ 4.9.8's benchmark Producer
(ROCKETMQ headers, each send its own write, round the 1024 queues of
``BenchmarkTest``), after a priming run that makes the queues' files; the
load issue 39 measured a DLedger group with.
With ``--floor`` the same
sends in flight also go to ``bench.floor``'s single and leader servers
(which store nothing; a raw JSON load, whose reads a message match the
producer's; the leader's pushes padded to a DLedger push's size), and their
ratio is printed beside the brokers': what a leader's traffic alone costs
over a single master's.

    .venv/bin/python -m bench.dledger_broker [--inflight 16] [--duration 5]
        [--runs single,group,unbatched] [--same-rate] [--full-page-cache] [--floor]
        [--java-frames]
        [--profile DIR [--native]]
        [--broker-conf KEY=VALUE ...]

Each broker runs with the default consume-queue and index files and entry
(commit-log) files of 256 MiB.
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
from pathlib import Path

import psutil

from bench import floor
from bench import java_frames as java
from bench.compare import pin
from bench.cpu import LOAD_CPU, read_write_calls
from bench.load import load_in_subprocess
from bench.modes import ROOT, mode_env
from bench.page_cache import MiB, PageCacheFiller
from rmq.client.admin import MQAdmin
from rmq.testing.cluster import broker_conf, start_namesrv
from rmq.testing.procs import RmqProcess, free_port

NAME = "RaftNode00"
MASTER_CPU = 0  # with --pin (the load, followers and name server on bench.cpu.LOAD_CPU)
# the defaults a broker runs with (consume queues, index files), but entry and
# commit-log files of 256 MiB rather than 1 GiB: a run's few hundred MiB
FILES = "mappedFileSizeCommitLog=268435456\n"
JAVA_PRIME_S = 2.0  # --java-frames: the run before each load that makes the queues' files


def cpu(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


Snapshot = tuple[dict[int, tuple[float, float]], tuple[int, int]]


def snapshot(pid: int) -> Snapshot:
    """(user, system) CPU seconds of each thread of ``pid``, and its (read,
    write) system calls so far."""
    return ({t.id: (t.user_time, t.system_time) for t in psutil.Process(pid).threads()},
            read_write_calls(pid))


def busiest_threads(before: Snapshot, after: Snapshot, sent: int, main_tid: int) -> str:
    """Per-thread CPU per message between two ``snapshot`` reads, the
    busiest first (the event loop is the process's main thread), and the
    process's read and write system calls per message (a round's reads,
    pushes and answers are paid per call, so their count per message tells
    how many messages a round carried)."""
    (t0, (r0, w0)), (t1, (r1, w1)) = before, after
    rows = sorted(((sum(t1[t]) - sum(t0.get(t, (0.0, 0.0))),
                    t1[t][1] - t0.get(t, (0.0, 0.0))[1], t) for t in t1), reverse=True)
    return ", ".join(f"{'loop' if t == main_tid else t}: {d / sent * 1e6:.1f} µs "
                     f"({s / sent * 1e6:.1f} system)" for d, s, t in rows[:3] if d > 0) + \
        f"; reads/msg {(r1 - r0) / sent:.2f}, writes/msg {(w1 - w0) / sent:.2f}"


def profile(pid: int, out: Path, seconds: float, native: bool) -> subprocess.Popen:
    """``py-spy record --gil`` of ``pid`` for ``seconds`` (collapsed stacks in
    ``out``), started in the background: with C frames (``--native``, which
    pauses the process for each sample) or without pausing it."""
    from bench.profiling import py_spy

    return subprocess.Popen([py_spy(), "record", "--pid", str(pid), "--duration",
                             str(int(seconds)), "--rate", "200", "--gil",
                             "--native" if native else "--nonblocking",
                             "--function", "--format", "raw", "--output", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)


async def master_and_topic(namesrv: str, ports: dict[str, int], queues: int) -> str:
    admin = MQAdmin(namesrv)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                addr = (await admin.cluster_info()).brokerAddrTable[NAME].brokerAddrs.get(0)
            except Exception:  # noqa: BLE001 - not registered yet
                addr = None
            if addr:
                await admin.create_topic(addr, "BenchTopic", queues, queues)
                await asyncio.sleep(1.0)  # the route reaches the name server
                return addr
            await asyncio.sleep(0.2)
        raise SystemExit("no master elected")
    finally:
        await admin.close()


def produce(namesrv: str, broker: str, pid: int, args, rate: float = 0.0) -> dict:
    """``bench/producer.py``'s figures of a run against ``broker`` (``rate``:
    its msgs/s held to that, else as fast as ``--inflight`` sends go), or
    with ``--java-frames`` those of the Java benchmark Producer's frames."""
    if args.java_frames:
        return java_frames(namesrv, broker, pid, args, rate)
    env = dict(os.environ, RMQ_LOAD_CPU=str(LOAD_CPU)) if args.pin else None
    out = subprocess.run(
        [sys.executable, "-m", "bench.producer", "-n", namesrv, "--broker", broker,
         "--broker-pid", str(pid), "--inflight", str(args.inflight), "--size", str(args.size),
         "--duration", str(args.duration), "--rate", str(rate), "--mode", "compiled",
         "--no-half-rate", "--json"],
        capture_output=True, text=True, cwd=ROOT, timeout=args.duration * 4 + 120, env=env)
    if out.returncode != 0:
        raise SystemExit(out.stdout[-2000:] + out.stderr[-2000:])
    return json.loads(out.stdout[out.stdout.index("{"):])["compiled"]


def java_frames(namesrv: str, broker: str, pid: int, args, rate: float) -> dict:
    """The Java benchmark Producer's frames (``bench.java_frames``' load)
    against ``broker`` (``prime``d); figures keyed as ``produce``'s.  No
    warm-up within the load: the priming run warmed the brokers, and the
    followers' CPU and every per-thread line are read around the whole load
    process, so a warm-up's sends would count in them but not in its
    messages (a fifth too much at the default 5 s)."""
    r = _java_load(java.load_spec(namesrv, broker, args.duration, args.size, args.inflight,
                                  warmup=0.0, broker_pid=pid, rate=rate), args)
    return {**r, "avg_rt_ms": r["avg_ms"]}


def prime(namesrv: str, broker: str, args) -> None:
    """With ``--java-frames``, ``bench.java_frames``' priming run before the
    measured one (before the CPU snapshots, which would otherwise count it)."""
    if args.java_frames:
        _java_load(java.prime_spec(namesrv, broker, JAVA_PRIME_S, args.size), args)


def _java_load(spec, args) -> dict:
    return load_in_subprocess(spec, mode_env("compiled"), cpu=LOAD_CPU if args.pin else None)


def group(tmp: Path, args, batch_push: bool) -> tuple[dict, float]:
    ns_port = free_port()
    namesrv = start_namesrv(tmp, ns_port)
    ids = ("n0", "n1", "n2")
    ports = {i: free_port(span=4) + 2 for i in ids}
    raft = {i: free_port() for i in ids}
    peers = ";".join(f"{i}-127.0.0.1:{raft[i]}" for i in ids)
    procs = {}
    try:
        for i in ids:
            conf = broker_conf(tmp, ports[i], "enableDLegerCommitLog=true\n"
                               f"dLegerGroup={NAME}\ndLegerPeers={peers}\ndLegerSelfId={i}\n"
                               f"{FILES}enableBatchPush={batch_push}\n{args.extra}",
                               name=NAME, store=f"s-{i}", small_files=False)
            procs[i] = RmqProcess("rmq.broker.startup", ["-c", conf, "-n", f"127.0.0.1:{ns_port}"],
                                  tmp / f"{i}.out", env={"ROCKETMQ_HOME": str(tmp)})
            procs[i].start(wait_for_port=ports[i])
        master = asyncio.run(master_and_topic(f"127.0.0.1:{ns_port}", ports, args.queues))
        leader = next(i for i in ids if master.endswith(f":{ports[i]}"))
        followers = [i for i in ids if i != leader]
        if args.pin:
            pin(procs[leader].pid, MASTER_CPU)
            for pid in [procs[i].pid for i in followers] + [namesrv.pid]:
                pin(pid, LOAD_CPU)
        prime(f"127.0.0.1:{ns_port}", master, args)
        before = {i: cpu(procs[i].pid) for i in followers}
        threads = {i: snapshot(procs[i].pid) for i in ids}
        spies = []
        if args.profile:
            out = Path(args.profile)
            out.mkdir(parents=True, exist_ok=True)
            kind = "batch" if batch_push else "single-push"
            spies = [profile(procs[i].pid, out / f"{kind}-{'leader' if i == leader else i}.raw",
                             args.duration, args.native)
                     for i in [leader] + followers]
        r = produce(f"127.0.0.1:{ns_port}", master, procs[leader].pid, args)
        sent = max(1, r["requests"])
        follower_us = sum(cpu(procs[i].pid) - before[i] for i in followers) / sent * 1e6
        for i in [leader] + followers:
            print(f"  {'leader' if i == leader else 'follower'} {i} threads: "
                  + busiest_threads(threads[i], snapshot(procs[i].pid), sent, procs[i].pid),
                  file=sys.stderr)
        for spy in spies:
            spy.wait(timeout=args.duration + 60)
        return r, follower_us
    finally:
        for p in procs.values():
            p.kill()
        namesrv.kill()


def single(tmp: Path, args, rate: float = 0.0) -> dict:
    ns_port = free_port()
    namesrv = start_namesrv(tmp, ns_port)
    port = free_port(span=4) + 2
    conf = broker_conf(tmp, port, FILES + args.extra, name="single", store="single",
                       small_files=False)
    broker = RmqProcess("rmq.broker.startup", ["-c", conf, "-n", f"127.0.0.1:{ns_port}"],
                        tmp / "single.out", env={"ROCKETMQ_HOME": str(tmp)})
    try:
        broker.start(wait_for_port=port)

        async def topic() -> None:
            admin = MQAdmin(f"127.0.0.1:{ns_port}")
            try:
                await admin.create_topic(f"127.0.0.1:{port}", "BenchTopic", args.queues,
                                         args.queues)
                await asyncio.sleep(1.0)
            finally:
                await admin.close()

        asyncio.run(topic())
        if args.pin:
            pin(broker.pid, MASTER_CPU)
            pin(namesrv.pid, LOAD_CPU)
        prime(f"127.0.0.1:{ns_port}", f"127.0.0.1:{port}", args)
        threads = snapshot(broker.pid)
        r = produce(f"127.0.0.1:{ns_port}", f"127.0.0.1:{port}", broker.pid, args, rate)
        print(f"  single master{' at ' + format(rate, ',.0f') + ' msgs/s' if rate else ''} "
              "threads: " + busiest_threads(
            threads, snapshot(broker.pid), max(1, r["requests"]), broker.pid), file=sys.stderr)
        return r
    finally:
        broker.kill()
        namesrv.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inflight", type=int, default=16)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--queues", type=int, default=8)
    ap.add_argument("--runs", default="single,group,unbatched",
                    help="which to run, of single, group (batched pushes), unbatched")
    ap.add_argument("--same-rate", action="store_true",
                    help="with single and group: the single master again, at the group's "
                    "msgs/s")
    ap.add_argument("--floor", action="store_true",
                    help="also bench.floor's single and leader servers at the same sends in "
                    "flight: the floor's leader-over-single ratio beside the brokers'")
    ap.add_argument("--full-page-cache", action="store_true",
                    help="top the page cache up before each run: new file pages come from "
                    "reclaim, as on a broker in service (bench.page_cache)")
    # (the filler's size at most, MiB: a test's top-up, not the machine's memory)
    ap.add_argument("--filler-max-mib", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--java-frames", action="store_true",
                    help="the load of bench.java_frames (the Java benchmark Producer's frames, "
                    "each send its own write) rather than bench/producer.py's")
    ap.add_argument("--pin", action="store_true",
                    help="the master (single, or the group's leader) on CPU 0; the followers, "
                    "the name server and the load on CPU 1")
    ap.add_argument("--profile", metavar="DIR",
                    help="py-spy record --gil each group member during the load (collapsed "
                    "stacks in DIR)")
    ap.add_argument("--native", action="store_true",
                    help="with --profile: C frames too (py-spy pauses each process per sample, "
                    "which slows the group down and raises the CPU figures)")
    ap.add_argument("--broker-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="extra broker property for every broker of the run (repeatable)")
    args = ap.parse_args()
    if any("=" not in kv or kv.startswith("=") for kv in args.broker_conf):
        ap.error("--broker-conf takes KEY=VALUE")
    args.extra = "".join(f"{kv}\n" for kv in args.broker_conf)
    runs = set(args.runs.split(","))
    rows = []
    at_rate = None  # the single master's figures at the group's rate (``--same-rate``)
    with tempfile.TemporaryDirectory() as tmp:
        for sub in ("single", "group", "batch", "rate"):
            (Path(tmp) / sub).mkdir()
        cap = None if args.filler_max_mib is None else args.filler_max_mib * MiB
        filler = (PageCacheFiller(Path(tmp) / "page-cache-filler", max_size=cap, sparse=True)
                  if args.full_page_cache else None)

        def fill() -> None:
            if filler is not None:
                print(filler.top_up_said(), file=sys.stderr, flush=True)

        if "single" in runs:
            fill()
            rows.append(("single master", single(Path(tmp) / "single", args), "-"))
        if "group" in runs:
            fill()
            three, follower_us = group(Path(tmp) / "group", args, True)
            rows.append(("3-node DLedger group", three, f"{follower_us:.1f} µs"))
        if "unbatched" in runs:
            fill()
            single_push, single_push_us = group(Path(tmp) / "batch", args, False)
            rows.append(("  with enableBatchPush=false", single_push, f"{single_push_us:.1f} µs"))
        if args.same_rate and {"single", "group"} <= runs:
            fill()
            at_rate = single(Path(tmp) / "rate", args, three["msgs_per_s"])
            rows.append(("single master, group's rate", at_rate, "-"))
        floors = None
        if args.floor:  # (on the same page cache as the brokers: their socket buffers' pages too)
            fill()
            pad = floor.dledger_pad(args.size)
            floors = (pad, *floor.run_floors(args.inflight, args.duration, args.size, pad=pad))
    print(f"{'broker':<30} {'msgs/s':>9} {'avg RT ms':>10} {'master CPU/msg':>15} "
          f"{'x single':>9} {'followers CPU/msg':>18}")
    base = max(rows[0][1]["broker_cpu_us_per_msg"], 1e-9) if "single" in runs else None
    for name, r, extra in rows:
        times = f"{r['broker_cpu_us_per_msg'] / base:>8.1f}x" if base else f"{'-':>9}"
        print(f"{name:<30} {r['msgs_per_s']:>9,.0f} {r['avg_rt_ms']:>10.2f} "
              f"{r['broker_cpu_us_per_msg']:>12.1f} µs {times} {extra:>18}")
    if at_rate is not None:
        print(f"the group's master at the same rate: "
              f"{three['broker_cpu_us_per_msg'] / max(at_rate['broker_cpu_us_per_msg'], 1e-9):.1f}x"
              " the single master's")
    if floors is not None:
        print_floor(*floors)


def print_floor(pad: int, med: dict, python: dict) -> None:
    """``bench.floor``'s single and leader servers at the same sends in
    flight (``floor.run_floors``' medians and own Python; the leader's pushes
    padded by ``pad`` bytes a send, a DLedger leader's size): their CPU per
    message, with and without their own Python, and their ratio."""
    cpu = {kind: m["broker_cpu_us_per_msg"] for kind, m in med.items()}
    bare = {kind: max(cpu[kind] - python[kind], 1e-9) for kind in cpu}
    print(f"floor (bench.floor, stores nothing): single {cpu['single']:.2f} µs/msg, leader "
          f"(pushes padded {pad} B a send, a DLedger push's size) {cpu['leader']:.2f}; "
          f"without their own Python {bare['single']:.2f} and {bare['leader']:.2f}: "
          f"a leader's traffic alone {bare['leader'] / bare['single']:.2f}x a single master's")


if __name__ == "__main__":
    main()
