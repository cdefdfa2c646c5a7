"""Broker memory with a big store and many clients.

Builds a store of ``--store-gib`` GiB (default 10) with rmq's own store
(``DefaultMessageStore.put_messages``: SEND_BATCH-style batches of 32
messages, so every record, consume-queue entry and index entry on disk is
what the broker itself writes), in a temporary directory under /tmp
(``--dir``); refuses to start with less than ``size + 5`` GiB free.  Then it
starts ``rmq-namesrv`` and ``rmq-broker`` on that store on free loopback
ports, connects ``--clients`` clients (one TCP connection each, one
HEART_BEAT with a producer group and a consumer group subscribed to a topic
and its retry topic, as a push consumer sends), pulls from the oldest and the
newest part of every queue, and reports the broker's memory from
/proc/<pid>/status: VmRSS, RssAnon (the broker's own memory: the aim is
< 300 MiB), RssFile (mapped store pages; they belong to the page cache) and
VmHWM, at each step, with the start-up (load + recovery) time and the
RssAnon cost per client.  The store is removed afterwards unless ``--keep``.

    .venv/bin/python -m bench.memory [--store-gib 10] [--clients 1000] [--groups 50]
        [--body 1024] [--dir /tmp] [--keep] [--reuse DIR] [--json PATH] [--quick]

``--quick`` is a smoke run (1 GiB store, 200 clients).  ``--reuse DIR`` starts
the broker on a store a previous ``--keep`` run left in DIR (no build).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.cluster import Cluster
from bench.cpu import proc_status
from bench.modes import mode_env
from bench.results import git_commit

GiB = 1 << 30
MiB = 1 << 20
AIM_MIB = 300
TOPICS = [f"MemTopic{i}" for i in range(4)]
QUEUES = 8
BATCH = 32
BUILD_MARK = "memory-bench-store.json"  # what a kept store holds (offsets, sizes)


# --- store -----------------------------------------------------------------------------
def check_disk(directory: str, need_bytes: int) -> None:
    free = shutil.disk_usage(directory).free
    if free < need_bytes:
        raise SystemExit(f"bench/memory.py: {free / GiB:.1f} GiB free under {directory}, "
                         f"{need_bytes / GiB:.0f} GiB needed; use a smaller --store-gib or another --dir")


def _template(body_size: int) -> tuple[bytearray, list[int]]:
    """A SEND_BATCH_MESSAGE body of BATCH messages and the positions of their
    32-character UNIQ_KEY values (patched per batch, so every message has its
    own key and index entry)."""
    from rmq.store.message_codec import message_properties_to_string

    out = bytearray()
    spots = []
    body = bytes(range(256)) * (body_size // 256) + bytes(body_size % 256)
    for i in range(BATCH):
        props = message_properties_to_string({"UNIQ_KEY": "0" * 32, "TAGS": f"tag{i % 3}",
                                              "KEYS": f"order{i}"}).encode()
        head = 20 + len(body) + 2
        rec = ((head + len(props)).to_bytes(4, "big") + bytes(8) + (0).to_bytes(4, "big")
               + len(body).to_bytes(4, "big") + body + len(props).to_bytes(2, "big"))
        spots.append(len(out) + len(rec) + props.index(b"0" * 32))
        out += rec + props
    return out, spots


def build_store(root: str, size: int, body_size: int) -> dict:
    """Append until the commit log holds ``size`` bytes; returns what was written."""
    from rmq.store import DefaultMessageStore, MessageExtBatch, MessageStoreConfig

    store = DefaultMessageStore(MessageStoreConfig(storePathRootDir=root), ("127.0.0.1", 10911))
    if not store.load():
        raise RuntimeError(f"the store under {root} did not load")
    store.start()
    wire, spots = _template(body_size)
    counter = 0
    n = 0
    t0 = time.monotonic()
    next_report = t0 + 10
    try:
        while store.get_max_phy_offset() < size:
            for s in spots:
                wire[s:s + 32] = b"%032X" % counter
                counter += 1
            topic = TOPICS[n % len(TOPICS)]
            r = store.put_messages(MessageExtBatch(
                topic=topic, queue_id=(n // len(TOPICS)) % QUEUES, body=bytes(wire),
                properties_string="WAIT\x01true", born_timestamp=int(time.time() * 1000),
                born_host=("127.0.0.1", 50000), store_host=("127.0.0.1", 10911)))
            if not r.is_ok():
                raise RuntimeError(f"the store refused a batch: {r.status}")
            n += 1
            if time.monotonic() > next_report:
                next_report += 10
                _log(f"  {store.get_max_phy_offset() / GiB:.2f} GiB written")
        offsets = {f"{t}:{q}": store.get_max_offset_in_queue(t, q) for t in TOPICS for q in range(QUEUES)}
        written = store.get_max_phy_offset()
    finally:
        store.shutdown()
    info = {"messages": counter, "commitlog_bytes": written, "build_s": time.monotonic() - t0,
            "body_bytes": body_size, "max_offsets": offsets}
    _write_topics(root)
    Path(root, BUILD_MARK).write_text(json.dumps(info))
    return info


def _write_topics(root: str) -> None:
    """config/topics.json in the 4.9.8 shape, so the broker serves the topics."""
    cfg = Path(root, "config")
    cfg.mkdir(parents=True, exist_ok=True)
    table = {t: {"order": False, "perm": 6, "readQueueNums": QUEUES, "topicFilterType": "SINGLE_TAG",
                 "topicName": t, "topicSysFlag": 0, "writeQueueNums": QUEUES} for t in TOPICS}
    doc = {"dataVersion": {"counter": 1, "timestamp": int(time.time() * 1000)},
           "topicConfigTable": table}
    (cfg / "topics.json").write_text(json.dumps(doc))


# --- clients ---------------------------------------------------------------------------------
async def connect_clients(addr: str, count: int, groups: int) -> tuple[list, int, float]:
    """``count`` connections, each sending one HEART_BEAT (a producer group and
    a push consumer group of ``groups`` groups); (writers, failures, seconds)."""
    from rmq.client.heartbeat import (
        ConsumeFromWhere,
        ConsumerData,
        ConsumeType,
        HeartbeatData,
        MessageModel,
        build_subscription,
    )
    from rmq.common.codes import RequestCode
    from rmq.remoting import RemotingCommand

    host, _, port = addr.rpartition(":")
    writers = []
    failures = 0

    async def one(i: int) -> None:
        nonlocal failures
        g = i % groups
        consumer = ConsumerData(f"mem_cg_{g}", ConsumeType.CONSUME_PASSIVELY, MessageModel.CLUSTERING,
                                ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
                                [build_subscription(TOPICS[g % len(TOPICS)], "*"),
                                 build_subscription(f"%RETRY%mem_cg_{g}", "*")])
        body = HeartbeatData(f"127.0.0.{1 + i // 250}@mem-{os.getpid()}-{i}", [f"mem_pg_{g}"],
                             [consumer]).encode()
        try:
            reader, writer = await asyncio.open_connection(host, int(port))
            req = RemotingCommand.create_request(RequestCode.HEART_BEAT, None, body)
            writer.write(req.encode())
            while True:  # the broker may first notify the group's other members (oneway)
                size = int.from_bytes(await asyncio.wait_for(reader.readexactly(4), 30), "big")
                resp = RemotingCommand.decode(await reader.readexactly(size))
                if resp.is_response() and resp.opaque == req.opaque:
                    break
            writers.append(writer)
            if resp.code != 0:
                failures += 1
        except (TimeoutError, OSError, asyncio.IncompleteReadError):
            failures += 1

    t0 = time.monotonic()
    for start in range(0, count, 100):
        await asyncio.gather(*(one(i) for i in range(start, min(start + 100, count))))
    return writers, failures, time.monotonic() - t0


async def pull_old_and_new(namesrv: str, offsets: dict[str, int]) -> dict:
    """32 messages from the start and from the end of every queue."""
    from rmq.client import LitePullConsumer, PullStatus

    consumer = LitePullConsumer("mem_puller", namesrv, auto_commit=False)
    await consumer.start()
    got = {"old": 0, "new": 0, "failed": 0}
    t0 = time.monotonic()
    try:
        for topic in TOPICS:
            for mq in await consumer.fetch_queues(topic):
                top = offsets.get(f"{topic}:{mq.queue_id}", 0)
                for label, off in (("old", 0), ("new", max(0, top - 32))):
                    r = await consumer.pull(mq, off, 32)
                    if r.status is PullStatus.FOUND:
                        got[label] += len(r.messages)
                    else:
                        got["failed"] += 1
    finally:
        await consumer.shutdown()
    got["seconds"] = time.monotonic() - t0
    return got


# --- the run ---------------------------------------------------------------------------------
def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _mem(pid: int) -> dict[str, float]:
    return {k: v / MiB for k, v in proc_status(pid).items()}


def raise_nofile(need: int) -> None:
    """Raise RLIMIT_NOFILE (inherited by the broker we start) to fit the clients."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = need if hard == resource.RLIM_INFINITY else min(max(soft, need), hard)
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    if want < need:
        raise SystemExit(f"bench/memory.py: RLIMIT_NOFILE hard limit {hard} < {need} needed")


async def _clients_phase(cluster: Cluster, args, offsets: dict, out: dict) -> None:
    pid = cluster.broker_pid
    out["pull"] = await pull_old_and_new(cluster.namesrv_addr, offsets)
    out["mem_after_pull"] = _mem(pid)
    _log(f"  pulled {out['pull']}; broker {out['mem_after_pull']}")
    writers, failures, secs = await connect_clients(cluster.broker_addr, args.clients, args.groups)
    out["clients"] = {"connected": len(writers), "failures": failures, "connect_s": secs}
    await asyncio.sleep(args.hold)
    out["mem_with_clients"] = _mem(pid)
    per = (out["mem_with_clients"]["RssAnon"] - out["mem_after_pull"]["RssAnon"]) * MiB / max(1, len(writers))
    out["rss_anon_per_client_bytes"] = per
    _log(f"  {len(writers)} clients ({failures} failed, {secs:.1f} s): broker {out['mem_with_clients']}, "
         f"{per / 1024:.1f} KiB RssAnon per client")
    for w in writers:
        w.close()


def run(args) -> dict:
    out: dict = {"commit": git_commit(), "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
                 "clients_wanted": args.clients, "groups": args.groups}
    if args.reuse:
        work = Path(args.reuse)
        info = json.loads((work / "store" / BUILD_MARK).read_text())
    else:
        os.makedirs(args.dir, exist_ok=True)
        check_disk(args.dir, int((args.store_gib + 5) * GiB))
        work = Path(tempfile.mkdtemp(prefix="rmq-memory-", dir=args.dir))
    out["workdir"] = str(work)
    try:
        if not args.reuse:
            _log(f"building a {args.store_gib:g} GiB store under {work}")
            info = build_store(str(work / "store"), int(args.store_gib * GiB), args.body)
            _log(f"  {info['messages']:,} messages, {info['commitlog_bytes'] / GiB:.2f} GiB in "
                 f"{info['build_s']:.0f} s")
        out["store"] = {k: v for k, v in info.items() if k != "max_offsets"}
        raise_nofile(args.clients + 1024)
        cluster = Cluster(env=mode_env("compiled"), workdir=work, keep=True,
                          broker_conf={"brokerName": "broker-mem"})
        _log("starting rmq-namesrv and rmq-broker on the store")
        with cluster:
            out["broker_start_s"] = cluster.broker_start_s
            out["mem_started"] = _mem(cluster.broker_pid)
            _log(f"  broker up in {cluster.broker_start_s:.2f} s: {out['mem_started']}")
            asyncio.run(_clients_phase(cluster, args, info["max_offsets"], out))
            out["mem_end"] = _mem(cluster.broker_pid)
    finally:
        if not args.keep and not args.reuse:
            shutil.rmtree(work, ignore_errors=True)
    anon = out.get("mem_with_clients", {}).get("RssAnon")
    out["aim_met"] = None if anon is None else anon < AIM_MIB
    return out


def report(out: dict) -> str:
    s = out.get("store", {})
    lines = [f"store: {s.get('commitlog_bytes', 0) / GiB:.2f} GiB commit log, {s.get('messages', 0):,} "
             f"messages of {s.get('body_bytes')} B (built in {s.get('build_s', 0):.0f} s)",
             f"broker start-up (load + recovery, until the port answers): {out.get('broker_start_s', 0):.2f} s",
             f"{'step':<28} {'VmRSS MiB':>10} {'RssAnon MiB':>12} {'RssFile MiB':>12} {'VmHWM MiB':>10}"]
    for key, label in (("mem_started", "started"), ("mem_after_pull", "after old+new pulls"),
                       ("mem_with_clients", f"with {out.get('clients', {}).get('connected')} clients"),
                       ("mem_end", "end")):
        m = out.get(key)
        if m:
            lines.append(f"{label:<28} {m.get('VmRSS', 0):>10.1f} {m.get('RssAnon', 0):>12.1f} "
                         f"{m.get('RssFile', 0):>12.1f} {m.get('VmHWM', 0):>10.1f}")
    if "rss_anon_per_client_bytes" in out:
        lines.append(f"RssAnon per client: {out['rss_anon_per_client_bytes'] / 1024:.1f} KiB")
    if out.get("aim_met") is not None:
        lines.append(f"RssAnon < {AIM_MIB} MiB with the clients: {'yes' if out['aim_met'] else 'NO'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store-gib", type=float, default=10.0, help="commit log size to build (GiB)")
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=50, help="producer/consumer groups the clients share")
    ap.add_argument("--body", type=int, default=1024, help="message body bytes")
    ap.add_argument("--hold", type=float, default=3.0, help="seconds the clients stay before sampling")
    ap.add_argument("--dir", default=tempfile.gettempdir(), help="where the store is built")
    ap.add_argument("--keep", action="store_true", help="keep the store (reuse it with --reuse)")
    ap.add_argument("--reuse", metavar="DIR", help="a directory a --keep run left (no build)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 GiB store, 200 clients")
    ap.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    args = ap.parse_args(argv)
    if args.quick:
        args.store_gib, args.clients = min(args.store_gib, 1.0), min(args.clients, 200)
    if args.store_gib <= 0 or args.clients < 0 or args.groups < 1 or args.body < 0:
        ap.error("--store-gib, --groups must be positive; --clients, --body not negative")
    out = run(args)
    print(report(out))
    if args.json:
        Path(args.json).write_text(json.dumps({"compiled": out}, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
