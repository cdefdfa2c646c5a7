"""Store benchmark: appends straight into the store (no network), reads back
through get_message, and abnormal recovery time; compiled build and the
pure-Python twins (RMQ_NO_EXTENSIONS=1, in a subprocess) in one run, with the
machine's own ``dd`` sequential-write figure for the same bytes as the ceiling.

    .venv/bin/python -m bench.store [--messages N] [--recovery-mb MB] [--dir DIR]
        [--quick] [--json PATH]

``--json PATH`` writes ``{"compiled": {...}, "twin": {...}, "dd_MB_per_s": ...}``
(what ``bench/run.py`` reads); ``--quick`` is a smoke run (40,000 messages,
64 MiB recovery).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from bench.modes import ROOT

HOST = ("127.0.0.1", 10911)


def _wire_batch(count: int, size: int) -> bytes:
    from rmq.store.message_codec import message_properties_to_string

    out = bytearray()
    body = b"b" * size
    for i in range(count):
        props = message_properties_to_string({"UNIQ_KEY": f"{i:032X}", "TAGS": "TagA"}).encode()
        n = 20 + len(body) + 2 + len(props)
        out += n.to_bytes(4, "big") + bytes(8) + (0).to_bytes(4, "big") + len(body).to_bytes(4, "big") + body
        out += len(props).to_bytes(2, "big") + props
    return bytes(out)


def _open_store(root: str, **kw):
    from rmq.store import DefaultMessageStore, MessageStoreConfig

    cfg = MessageStoreConfig(storePathRootDir=root, **kw)
    store = DefaultMessageStore(cfg, HOST)
    assert store.load()
    store.start()
    return store


def bench_appends(root: str, size: int, batch: int, messages: int) -> dict:
    from rmq.store import MessageExtBatch, MessageExtBrokerInner
    from rmq.store.message_codec import message_properties_to_string

    store = _open_store(root, mappedFileSizeCommitLog=256 * 1024 * 1024, messageIndexEnable=False)
    props = {"UNIQ_KEY": "0" * 32, "TAGS": "TagA"}
    ps = message_properties_to_string(props)
    body = b"b" * size
    n = 0
    start = time.perf_counter()
    cpu0 = time.process_time()
    if batch == 1:
        put = store.put_message
        while n < messages:
            put(MessageExtBrokerInner(topic="Bench", queue_id=n & 7, body=body, properties=props,
                                      properties_string=ps, born_timestamp=1))
            n += 1
    else:
        wire = _wire_batch(batch, size)
        while n < messages:
            r = store.put_messages(MessageExtBatch(topic="Bench", queue_id=(n // batch) & 7, body=wire,
                                                   properties_string="WAIT\x01true", born_timestamp=1))
            assert r.is_ok(), r.status
            n += batch
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    written = store.get_max_phy_offset()
    # read everything back through get_message (page cache)
    rstart = time.perf_counter()
    got = 0
    for qid in range(8):
        off = 0
        while True:
            g = store.get_message("bench", "Bench", qid, off, 32)
            if not g.message_buffers:
                break
            got += len(g.message_buffers)
            off = g.next_begin_offset
            g.release()
    read_s = time.perf_counter() - rstart
    store.shutdown()
    shutil.rmtree(root)
    return {"msgs_per_s": n / elapsed, "MB_per_s": written / elapsed / 1e6, "cpu_us_per_msg": cpu / n * 1e6,
            "bytes": written, "read_msgs_per_s": got / read_s, "read_count": got}


def bench_recovery(root: str, mb: int) -> dict:
    """Fill ``mb`` MiB of 1 KiB messages, crash (abort kept), time abnormal recovery."""
    from rmq.store import DefaultMessageStore, MessageExtBatch, MessageStoreConfig

    file_size = 256 * 1024 * 1024
    store = _open_store(root, mappedFileSizeCommitLog=file_size)
    wire = _wire_batch(32, 1024)
    target = mb * 1024 * 1024
    i = 0
    while store.get_max_phy_offset() < target:
        store.put_messages(MessageExtBatch(topic="Bench", queue_id=i & 7, body=wire, born_timestamp=1))
        i += 1
    store.commit_log.mfq.flush(0)
    count = store.commit_log.topic_queue_table
    total_msgs = sum(count.values())
    # leave it as a kill would: abort file stays, nothing closed cleanly
    store._shutdown = True
    for svc in (store.clean_service, store.stats, store.flush_service, store.flush_cq_service):
        svc.shutdown()
    store.commit_log.allocator.shutdown()
    store._release_lock()
    os.unlink(os.path.join(root, "checkpoint"))
    start = time.perf_counter()
    s2 = DefaultMessageStore(MessageStoreConfig(storePathRootDir=root, mappedFileSizeCommitLog=file_size), HOST)
    assert s2.load()
    s2.start()
    elapsed = time.perf_counter() - start
    recovered = sum(s2.get_max_offset_in_queue("Bench", q) for q in range(8))
    s2.shutdown()
    shutil.rmtree(root)
    assert recovered == total_msgs, (recovered, total_msgs)
    return {"mb": mb, "messages": total_msgs, "seconds": elapsed}


def worker(args) -> dict:
    from rmq._fast import compiled

    out = {"compiled": compiled("store_codec") is not None}
    for size in (128, 1024):
        for batch in (1, 32):
            root = tempfile.mkdtemp(dir=args.dir)
            msgs = args.messages if batch > 1 else args.messages // 4
            out[f"append_{size}B_batch{batch}"] = bench_appends(root, size, batch, msgs)
    if args.recovery_mb:
        out["recovery"] = bench_recovery(tempfile.mkdtemp(dir=args.dir), args.recovery_mb)
    return out


def dd_figure(directory: str, mb: int) -> float:
    path = os.path.join(directory, "dd.bench")
    try:
        start = time.perf_counter()
        subprocess.run(["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={mb}", "conv=fdatasync"],
                       check=True, capture_output=True)
        return mb * 1024 * 1024 / (time.perf_counter() - start) / 1e6
    finally:
        if os.path.exists(path):
            os.unlink(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=400_000, help="messages per batched run (single runs: 1/4)")
    ap.add_argument("--recovery-mb", type=int, default=1024, help="commit log size for the recovery run (0 = skip)")
    ap.add_argument("--dir", default=None, help="where to put the stores (default: a temp dir)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 40,000 messages, 64 MiB recovery")
    ap.add_argument("--json", metavar="PATH", help="also write the figures as JSON to PATH")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.quick:
        args.messages = min(args.messages, 40_000)
        args.recovery_mb = min(args.recovery_mb, 64)
    if args.worker:
        print(json.dumps(worker(args)))
        return
    base = [sys.executable, "-m", "bench.store", "--worker", "--messages", str(args.messages), "--recovery-mb",
            str(args.recovery_mb)] + (["--dir", args.dir] if args.dir else [])
    results = {}
    for label, env in (("compiled", {"RMQ_REQUIRE_EXTENSIONS": "1"}), ("twin", {"RMQ_NO_EXTENSIONS": "1"})):
        proc = subprocess.run(base, env=dict(os.environ, **env), capture_output=True, text=True,
                              check=False, cwd=ROOT)
        if proc.returncode != 0:
            sys.exit(f"{label} run failed:\n{proc.stderr[-3000:]}")
        results[label] = json.loads(proc.stdout.strip().splitlines()[-1])
    c, t = results["compiled"], results["twin"]
    print(f"{'figure':<28} {'compiled':>14} {'twins':>14} {'ratio':>7}")
    for key in [k for k in c if k.startswith("append_")]:
        for fig, unit in (("msgs_per_s", "msgs/s"), ("MB_per_s", "MB/s"), ("cpu_us_per_msg", "us CPU/msg"),
                          ("read_msgs_per_s", "read msgs/s")):
            a, b = c[key][fig], t[key][fig]
            ratio = (b / a) if fig == "cpu_us_per_msg" else (a / b)
            print(f"{key + ' ' + unit:<40} {a:>14,.1f} {b:>14,.1f} {ratio:>6.2f}x")
    if "recovery" in c:
        rc, rt = c["recovery"], t["recovery"]
        print(f"abnormal recovery of {rc['mb']} MiB ({rc['messages']} msgs, CRC on): compiled {rc['seconds']:.2f} s, "
              f"twins {rt['seconds']:.2f} s")
    mb = max(64, int(c["append_1024B_batch32"]["bytes"] / 1e6))
    dd = dd_figure(args.dir or tempfile.gettempdir(), mb)
    print(f"dd sequential write (conv=fdatasync) of {mb} MiB: {dd:,.0f} MB/s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**results, "dd_MB_per_s": dd}, f, indent=2)


if __name__ == "__main__":
    main()
