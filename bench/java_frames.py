"""The Java benchmark Producer's load without Java: broker CPU per message
and the share of the sends the send lane served.

Apache RocketMQ 4.9.8's ``example/benchmark/Producer`` sets
``rocketmq.serialize.type=ROCKETMQ``: every SEND_MESSAGE_V2 it sends has the
binary header, group ``benchmark_producer``, topic ``BenchmarkTest`` (a
system topic of 1024 queues, which its client's sends go round) and the
properties ``UNIQ_KEY`` and ``WAIT=true`` in its client's order
(``bench.raw.RawRequests`` with ``java=True`` writes exactly those
frames).  For each number of requests in flight the load runs against a
fresh broker with the lanes on and with them off (the general path: what
served these frames before the lanes read the binary header), alternated
``--rounds`` times; the medians are reported with the lane-served share
(``rmqSendLaneServed`` over the messages put, from GET_BROKER_RUNTIME_INFO).

``--full-page-cache`` measures a broker in service, whose new commit-log
pages come from reclaiming old page cache, not from free memory (on this
machine kind a first touch of free memory is dear: ``bench/page_cache.py``):
a sparse file of the machine's memory is read beside the stores before
each load (no disk blocks), and removed at the end; the reclaim threads'
CPU per message is printed beside the broker's.

``--naps on`` runs the brokers with read naps (``rmqReadNapMicros=100``, or
the value ``--broker-conf`` gives: the loop sleeps a little after a read of
2 to 15 requests, so the next read takes what came meanwhile), labelled
"naps"; ``--naps both`` runs each broker twice a round, without (the
default, ``rmqReadNapMicros=0``) and with.

``--floor`` adds, each round, the same load against ``bench.floor``'s single
server, which answers every send and stores nothing: what the event loop and
the kernel cost at that pacing, below which no broker's figure can go.  It
naps as the brokers do (``--naps``: a floor row not napping, one napping
as the brokers, or both).

    .venv/bin/python -m bench.java_frames [--inflight 1 16 64] [--rounds 3]
        [--seconds 5] [--size 1024] [--json-frames] [--lanes both|on|off] [--naps on|off|both]
        [--broker-conf KEY=VALUE ...] [--full-page-cache] [--floor]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time

import orjson

from bench import floor
from bench.cluster import Cluster
from bench.cpu import LOAD_CPU
from bench.load import LoadSpec, load_in_subprocess
from bench.modes import OUT_DIR, mode_env
from bench.page_cache import MiB, PageCacheFiller, kswapd_seconds, meminfo
from rmq.common.codes import RequestCode
from rmq.remoting import RemotingClient, RemotingCommand

TOPIC = "BenchmarkTest"
FLOOR = "floor"  # the rows of bench.floor's single server (--floor)
QUEUES = 1024  # BenchmarkTest's queues (TopicConfigManager's system topic)


PRIME_INFLIGHT = 64  # the priming run's sends in flight


def load_spec(namesrv: str, broker_addr: str, seconds: float, size: int, inflight: int,
              warmup: float = 1.0, broker_pid: int = 0, rate: float = 0.0,
              json_frames: bool = False) -> LoadSpec:
    """The Java benchmark Producer's load against ``broker_addr``: its
    frames (JSON headers with ``json_frames``), each send in its own write,
    round the ``QUEUES`` queues of ``TOPIC``."""
    return LoadSpec("send", namesrv, TOPIC, seconds=seconds, warmup=warmup, size=size,
                    inflight=inflight, rate=rate, broker_pid=broker_pid,
                    broker_addr=broker_addr, raw=True, queues=QUEUES, write_each=True,
                    java_frames=not json_frames)


def prime_spec(namesrv: str, broker_addr: str, seconds: float, size: int,
               json_frames: bool = False) -> LoadSpec:
    """A run of ``load_spec``'s load that makes the queues' files (a queue's
    first message creates them), as the Java load does early in its long
    run: before a measured one."""
    return load_spec(namesrv, broker_addr, seconds, size, PRIME_INFLIGHT, warmup=0.0,
                     json_frames=json_frames)


async def _runtime(addr: str) -> dict:
    client = RemotingClient()
    try:
        resp = await client.invoke(addr, RemotingCommand.create_request(
            RequestCode.GET_BROKER_RUNTIME_INFO), 10_000)
        return orjson.loads(resp.body)["table"]
    finally:
        await client.close()


def _served(table: dict) -> tuple[int, int, int]:
    """The sends the lane stored, the messages put, the loop's read naps."""
    return (int(table.get("rmqSendLaneServed", 0)), int(table["msgPutTotalTodayNow"]),
            int(table.get("rmqReadNaps", 0)))


def _fill(filler: PageCacheFiller | None) -> None:
    """--full-page-cache: top the page cache up before a load."""
    if filler is not None:
        print(filler.top_up_said(), flush=True)


def _memory() -> str:
    return f"MemFree {meminfo('MemFree') / MiB:,.0f} MiB, Cached {meminfo('Cached') / MiB:,.0f} MiB"


# the broker properties of a variant's settings
LANES_OFF = {"rmqSendLaneEnable": "false", "rmqPullLaneEnable": "false"}
NAP_US = 100  # --naps: the brokers' rmqReadNapMicros (unless --broker-conf sets it)


def _broker_conf(args) -> dict[str, str]:
    """``--broker-conf``'s properties."""
    return dict(kv.split("=", 1) for kv in args.broker_conf)


def _naps(args) -> list[tuple[str, int]]:
    """The label suffixes and ``rmqReadNapMicros`` of ``--naps``: without
    naps, with them, or both -- for the brokers and the floor alike."""
    nap_us = int(_broker_conf(args).get("rmqReadNapMicros", NAP_US))
    return [(suffix, us) for suffix, us, skip in (("", 0, "on"), (", naps", nap_us, "off"))
            if args.naps != skip]


def _variants(args) -> list[tuple[str, dict[str, str]]]:
    """The brokers of a round, by label: lanes off and on (``--lanes``),
    each with read naps, without, or both (``--naps``)."""
    lanes = [("lanes off", LANES_OFF), ("lanes on", {})]
    if args.lanes != "both":
        lanes = [v for v in lanes if v[0] == f"lanes {args.lanes}"]
    return [(label + suffix, {**conf, "rmqReadNapMicros": str(us)})
            for label, conf in lanes for suffix, us in _naps(args)]


def _round(variant: dict[str, str], inflights: list[int], args,
           filler: PageCacheFiller | None = None) -> dict[int, dict]:
    """One broker (``variant``'s properties over ``--broker-conf``), every
    in-flight figure against it."""
    conf = {**_broker_conf(args), **variant}
    out = {}
    with Cluster(env=mode_env("compiled"), broker_conf=conf, pin=True) as cluster:
        # first a run that makes the 1024 consume queues (a queue's first
        # message creates its file), as the Java load does early in its long run
        prime = prime_spec(cluster.namesrv_addr, cluster.broker_addr, args.prime, args.size,
                           args.json_frames)
        _fill(filler)
        load_in_subprocess(prime, mode_env("compiled"), cpu=LOAD_CPU)
        for inflight in inflights:
            _fill(filler)
            kswapd0, t0 = kswapd_seconds(), time.monotonic()
            before = _served(asyncio.run(_runtime(cluster.broker_addr)))
            spec = load_spec(cluster.namesrv_addr, cluster.broker_addr, args.seconds, args.size,
                             inflight, broker_pid=cluster.broker_pid,
                             json_frames=args.json_frames)
            r = load_in_subprocess(spec, mode_env("compiled"), cpu=LOAD_CPU)
            if r.get("msgs_per_s"):
                # over the whole load process (warm-up included) at the measured rate
                msgs = r["msgs_per_s"] * (time.monotonic() - t0)
                r["kswapd_cpu_us_per_msg"] = (kswapd_seconds() - kswapd0) / msgs * 1e6
            after = _served(asyncio.run(_runtime(cluster.broker_addr)))
            put = after[1] - before[1]
            r["lane_share"] = (after[0] - before[0]) / put if put else 0.0
            r["naps_per_msg"] = (after[2] - before[2]) / put if put else 0.0
            out[inflight] = r
    return out


def _floors(args) -> list[tuple[str, int]]:
    """The floor servers of a round (``--floor``), by label, with the naps
    they take: as the brokers' (``--naps``), so that each broker row has a
    floor row at its pacing."""
    return [(FLOOR + suffix, us) for suffix, us in _naps(args)]


def _floor_python(runs: dict[tuple[str, int], list[dict]], args) -> None:
    """Print each floor server's own Python per message at the messages a
    read it met: the part of its row a compiled server would not pay."""
    for label, _ in _floors(args):
        parts = []
        for inflight in args.inflight:
            per_read = statistics.median(r.get("broker_msgs_per_read", 1.0)
                                         for r in runs[(label, inflight)])
            us = floor.python_cost("single", args.size, not args.json_frames, per_read)
            parts.append(f"{us:.2f} µs/msg at {inflight} in flight")
        print(f"{label}: bench.floor's single server (answers, stores nothing); of its CPU, "
              "its own Python (a compiled server would not pay it): " + ", ".join(parts))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inflight", type=int, nargs="+", default=[1, 16, 64])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--prime", type=float, default=15.0,
                    help="seconds of load before measuring (until every queue exists)")
    ap.add_argument("--json-frames", action="store_true",
                    help="the same load with JSON headers (a Java client on its default)")
    ap.add_argument("--lanes", choices=("both", "on", "off"), default="both",
                    help="brokers to run: lanes off and on alternated (default), or one kind")
    ap.add_argument("--naps", choices=("on", "off", "both"), default="off",
                    help="brokers without read naps (the default), with them "
                         f"(rmqReadNapMicros={NAP_US} unless --broker-conf sets it), or both "
                         "alternated")
    ap.add_argument("--broker-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="extra broker property for every broker (repeatable)")
    ap.add_argument("--floor", action="store_true",
                    help="each round also the same load against bench.floor's single "
                         "server, which answers and stores nothing: the loop and the "
                         "kernel's own cost at that pacing")
    ap.add_argument("--full-page-cache", action="store_true",
                    help="measure with the page cache full, as on a broker in service: a "
                         "sparse file beside the stores is read until little memory is free")
    args = ap.parse_args(argv)
    if any("=" not in kv for kv in args.broker_conf):
        ap.error("--broker-conf takes KEY=VALUE")
    if args.rounds < 1 or any(n < 1 for n in args.inflight):
        print("java_frames: --rounds and --inflight must be >= 1", file=sys.stderr)
        return 2
    runs: dict[tuple[str, int], list[dict]] = {}
    memory_before = _memory()
    filler = None
    if args.full_page_cache:
        OUT_DIR.mkdir(parents=True, exist_ok=True)
        filler = PageCacheFiller(OUT_DIR / f"page-cache-filler-{os.getpid()}", sparse=True)
    try:
        for _ in range(args.rounds):
            for label, variant in _variants(args):
                for inflight, r in _round(variant, args.inflight, args, filler).items():
                    runs.setdefault((label, inflight), []).append(r)
            for label, nap_us in _floors(args) if args.floor else ():
                for inflight in args.inflight:
                    r = floor.measure("single", inflight, args.seconds, args.size,
                                      not args.json_frames, nap_us=nap_us)
                    runs.setdefault((label, inflight), []).append(r)
        memory_loaded = _memory()
    finally:
        if filler is not None:
            filler.remove()
    frames = "JSON" if args.json_frames else "ROCKETMQ (Java benchmark Producer)"
    cache = "full page cache" if args.full_page_cache else "free memory"
    print(f"{frames} frames, {args.size} B, {cache}, {args.rounds} alternated rounds, medians")
    print(f"/proc/meminfo before: {memory_before}; after the loads: {memory_loaded}; "
          f"at the end: {_memory()}")
    # the broker's cost per message is its cost per read over the messages a
    # read brings, which the two sides' timing sets: the figure is only
    # comparable between runs beside its messages per read
    kswapd = " kswapd CPU µs/msg |" if args.full_page_cache else ""
    print("| in flight | broker | msgs/s | broker CPU µs/msg | of it system | msgs/read "
          f"| broker µs/read | lane-served share | naps/msg |{kswapd}")
    print("|---|---|---|---|---|---|---|---|---|" + ("---|" if kswapd else ""))
    for (label, inflight), rs in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        med = {k: statistics.median(r.get(k, 0.0) for r in rs)
               for k in ("msgs_per_s", "broker_cpu_us_per_msg", "lane_share", "naps_per_msg",
                         "broker_system_us_per_msg", "broker_msgs_per_read",
                         "kswapd_cpu_us_per_msg")}
        per_read = statistics.median(r["broker_cpu_us_per_msg"] * r.get("broker_msgs_per_read", 0.0)
                                     for r in rs)
        share = "-" if label.startswith(FLOOR) else f"{med['lane_share']:.0%}"
        naps = "-" if label.startswith(FLOOR) else f"{med['naps_per_msg']:.3f}"
        print(f"| {inflight} | {label} | {med['msgs_per_s']:,.0f} | "
              f"{med['broker_cpu_us_per_msg']:.1f} | {med['broker_system_us_per_msg']:.1f} | "
              f"{med['broker_msgs_per_read']:.1f} | {per_read:.0f} | {share} | {naps} |"
              + (f" {med['kswapd_cpu_us_per_msg']:.2f} |" if kswapd else ""))
    if args.floor:
        _floor_python(runs, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
